// Package arrowexport exports what a ctxgraph store holds — the steps a
// fleet lived, its episodes, and the graph's nodes and edges — as Arrow
// record batches, written as Arrow IPC (file or stream), Parquet (zstd)
// or a LeRobot dataset directory, for training jobs to read without a
// conversion step.
//
// [Run] reads one [particle.Snapshot] (one Badger read transaction), so
// an export is consistent while ingest goes on, and streams it in record
// batches of at most [Options.BatchRows] rows (and about
// [Options.BatchBytes] bytes): memory holds a few batches whatever the
// store's size. Steps are scanned and parsed on one goroutine and built
// into columns on another while a third writes, so the export uses the
// machine's cores.
//
// Policy: [Filter.Principal] is judged by the particle package's policy
// evaluation, one Snapshot.Guard per export, with Principal.Export set:
// an export never holds a record its principal may not see, nor an id
// of one in another record's lists (episode nodes and edges, a step's
// graph context, an edge's provenance, a node's episodes:
// Guard.VisibleEdge and VisibleNode).
//
// Every schema carries the metadata ctxgraph.table, ctxgraph.schema_version
// ([SchemaVersion]), ctxgraph.exported_at (RFC 3339, the time salience is
// decayed to), ctxgraph.namespace and, when set, ctxgraph.roles. Times are
// timestamp[ns, UTC], null when unset. Lists of ids are list<utf8>, empty
// (not null) when there are none. Embeddings are
// fixed_size_list<float32>[dim] when every record of the export has the
// same width, list<float32> otherwise; null when a record has none.
//
// # steps
//
// One row per stored step, episodes in id order, steps in index order:
//
//	episode_id            utf8
//	agent                 utf8
//	step_index            int64
//	timestamp             timestamp[ns, UTC]
//	observation.<name>    one column per observation feature (see below)
//	action | action.<name> one column per action feature ("action" for a flat action)
//	reward                float64
//	discount              float64
//	is_first, is_last, is_terminal  bool
//	language_instruction  utf8 (null when empty)
//	context_node_ids      list<utf8>     nodes at either end of the step's context edges
//	context_node_confidence list<float64> their belief score
//	context_node_salience list<float64>  the highest salience of their edges at this step
//	context_edge_ids      list<utf8>     edges whose provenance is this step (episode, step index)
//	context_edge_confidence list<float64>
//	context_edge_salience list<float64>  salience decayed to the export time
//
// A feature column is named by its RLDS path with "." for "/"
// ([ColumnName]) and typed by its real dtype: a numeric feature
// (float32, float64, int64, int32, uint8, bool) whose shape is the same
// in every exported episode is fixed_size_list<dtype>[elements] (row-major
// for 2-D and more), else list<dtype>; a string feature is list<utf8>;
// an image or bytes feature is binary, holding the encoded bytes (JPEG,
// PNG) it came in. Feature fields carry the metadata ctxgraph.feature
// (the RLDS name, e.g. observation/state), ctxgraph.dtype and, for fixed
// shapes, ctxgraph.shape (JSON, [] for a scalar). A step without a
// feature has null there. Edges keep their particle.MaxProvenance most
// recent sightings, so an early step of an edge seen very often shows it
// no more.
//
// # episodes
//
//	id, namespace, agent         utf8
//	start_time, end_time         timestamp
//	location, language_instruction utf8 (nullable)
//	success                      bool (null: unknown)
//	reward_sum                   float64 (null: unknown)
//	steps                        int64
//	ended                        bool
//	nodes, edges                 list<utf8>  ids of the graph records the episode touched (visible ones)
//	embedding                    the centroid of its nodes' embeddings
//	metadata                     utf8, JSON (field metadata ctxgraph.encoding=json)
//	features                     map<utf8, utf8>  feature name -> dtype and shape ("float32[7]")
//	last_tool                    utf8 (nullable)
//	node_id                      utf8  the episode's node
//	seq                          uint64
//
// # nodes
//
//	id, namespace, type, name    utf8
//	aliases, tags, cms_span_ids, rlds_episode_ids  list<utf8>
//	props                        map<utf8, utf8> (null when empty)
//	embedding
//	belief_score, belief_alpha, belief_beta, belief_evidence float64
//	belief_updated_at, created_at, updated_at  timestamp
//	seq                          uint64
//
// # edges
//
//	id, namespace, source, target, type  utf8
//	predicate                    utf8 (null: no assertion)
//	value                        utf8 (nullable)
//	scope_from, scope_to         timestamp
//	scope_location               utf8 (nullable)
//	scope_audience               list<utf8>
//	provenance                   list<struct<episode_id utf8, step_index int64, cms_span_id utf8, agent utf8, observed_at timestamp>>
//	evidence                     int64
//	confidence, belief_score, belief_alpha, belief_beta, belief_evidence  float64
//	belief_updated_at            timestamp
//	embedding
//	salience_score               float64  as stored
//	salience_decayed             float64  decayed to the export time with the edge's own function and half-life
//	salience_decay_fn            utf8
//	salience_half_life_s         float64
//	salience_last_updated        timestamp
//	allow_roles, deny_roles      list<utf8>
//	policy_sensitivity, policy_subject, policy_origin  utf8 (nullable)
//	policy_portable              bool (null: unset)
//	valid_from, valid_to         timestamp
//	status                       utf8
//	superseded_by                utf8 (nullable)
//	ended_at                     timestamp
//	contradicts                  list<utf8>
//	created_at, updated_at       timestamp
//	seq                          uint64
//
// [DecodeSteps], [DecodeEpisodes], [DecodeNodes] and [DecodeEdges] read
// record batches of these tables back into Go values.
//
// # Formats
//
// [FormatArrow] is the Arrow IPC file format; [NewWriter] writes it to
// any io.Writer, seekable or not. [FormatArrowStream] is the IPC stream
// format, what GET /v1/export streams. [FormatParquet] is Parquet 2.6
// with zstd, dictionary encoding, row groups of up to 64 Ki rows and the
// Arrow schema stored, so Arrow readers get the exact types back.
// [SplitWriter] cuts an export into files of N rows. [LeRobotWriter]
// writes the LeRobot v2.1 dataset layout from a steps export.
package arrowexport
