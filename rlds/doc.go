// Package rlds holds RLDS episodes and steps: the step wire format that
// robot controllers send, and a reader for RLDS datasets stored the way
// TensorFlow Datasets writes them (TFRecord shards of tf.train.Example),
// with no TensorFlow and no generated protobuf code.
//
// A [Message] is one unit on the wire (episode start, step, episode
// end), in JSON or in MessagePack ([Message.AppendMsgpack]; the
// MessagePack forms are rlds/mplex's); an [Episode] is a whole episode
// in memory, and [Episode.Messages] turns it into its messages.
//
// # Reading a dataset
//
// [OpenDataset] opens a TFDS version folder (bridge_dataset/1.0.0/) and
// [Dataset.Episodes] streams its episodes, one record at a time:
//
//	ds, err := rlds.OpenDataset("bridge_dataset/1.0.0")
//	...
//	err = ds.Episodes(ctx, func(ep *rlds.Episode) error { ... })
//
// The layers below are usable on their own: [TFRecordReader] frames
// records, [ParseExample] decodes a tf.train.Example, [ParseSchema] and
// [ParseDatasetInfo] read features.json and dataset_info.json, and
// [DecodeEpisode] turns one record into an Episode.
//
// # TFRecord framing
//
// A TFRecord file is a sequence of records, each
//
//	uint64 length         little-endian
//	uint32 masked_crc     of the 8 length bytes
//	byte   data[length]   a serialized tf.train.Example
//	uint32 masked_crc     of data
//
// where masked_crc(b) = ((c >> 15) | (c << 17)) + 0xa282ead8 for c the
// CRC-32C (Castagnoli) of b. Both CRCs are checked; a bad one, a length
// over the limit or a file that ends inside a record is a [*RecordError]
// naming the file and byte offset and wrapping [ErrCorrupt]. Asked to
// skip, the reader resynchronises on the next position where a length
// and its CRC agree.
//
// # From an Example to an Episode
//
// One tf.train.Example is one whole episode. TFDS flattens nested
// feature dicts into "/"-joined keys, and concatenates every per-step
// feature over the episode's T steps, row-major:
//
//	steps/is_first                  int64_list, T values (T is read from here)
//	steps/action                    float_list, T*7 values: Step.Action[""]
//	steps/action/world_vector       float_list, T*3 values: Step.Action["world_vector"]
//	steps/observation/image         bytes_list, T encoded images: Step.Observation["image"]
//	steps/observation/depth         bytes_list, T zlib blobs when encoding is zlib
//	steps/language_instruction      bytes_list, T strings: Step.LanguageInstruction
//	steps/<other>                   Step.Metadata["<other>"]
//	episode_metadata/file_path      Episode.Metadata["episode_metadata/file_path"]
//	success, attributes/..., ...    Episode.Metadata (success also Episode.Success)
//
// features.json gives each feature's dtype, per-step shape and encoding
// ([Schema]); without it shapes are inferred from the first record, with
// a warning. Images stay encoded, their format read from magic bytes.
// Episode IDs are name-based UUIDs of dataset, version, split, shard and
// record index ([EpisodeID]), since episode_metadata/episode_id is not
// unique. Decoders never panic on bad input: fuzz_test.go fuzzes them.
package rlds
