package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ctxgraph/ctxgraph/cmd/internal/daemon"
)

// The operator's commands: check a stopped store, work the dead-letter
// queue, back up and restore, forget an entity.
func init() {
	extraCommands = append(extraCommands, checkCmd, dlqCmd, backupCmd, restoreCmd, forgetCmd)
}

func checkCmd() *cobra.Command {
	var configPath, data string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check --data DIR",
		Short: "Verify a stopped daemon's data: the store's consistency and every derived index against it",
		Long: `check opens the store in DIR/graph (recovering it as a restart would; the
daemon must be stopped) and verifies it: every edge's endpoints exist, the
out/in adjacency (with each entry's copy of its edge's facts) and identity
entries match the edges, alias entries point
at live nodes, every step belongs to an episode, blobs referenced exist,
recorded counts match, and the memory-resident view loaded from Badger
matches Badger. It then rebuilds the derived indexes (vector index, ...)
from the store and compares them with it. It prints what it found and exits
non-zero if anything is wrong.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := daemon.LoadConfig(configPath)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("data") {
				cfg.Data = data
			}
			res, err := daemon.Check(cmd.Context(), cfg, nil)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				b, _ := json.MarshalIndent(res, "", "  ")
				fmt.Fprintf(out, "%s\n", b)
			} else {
				printCheck(out, res)
			}
			if !res.OK() {
				return errSilent
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&configPath, "config", "", "YAML config file (for the data dir and the embedding dimension)")
	f.StringVar(&data, "data", "./ctxgraph-data", "data directory")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func printCheck(w io.Writer, res *daemon.CheckResult) {
	s := res.Store
	fmt.Fprintf(w, "store %s\n", filepath.Join(res.Data, "graph"))
	fmt.Fprintf(w, "  read %d nodes, %d edges, %d episodes, %d steps, %d spans, %d blobs, %d sessions\n",
		s.Nodes, s.Edges, s.Episodes, s.Steps, s.Spans, s.Blobs, s.Sessions)
	fmt.Fprintf(w, "  and %d alias, %d applied-message entries, %d records, %d embeddings stored apart, %d chunks of episodes' edge lists\n",
		s.Aliases, s.Applied, s.Records, s.Vectors, s.EdgeChunks)
	if s.Identities+s.Adjacency > 0 {
		fmt.Fprintf(w, "  and %d identity, %d adjacency entries of an earlier version (not required)\n", s.Identities, s.Adjacency)
	}
	if s.OK() {
		fmt.Fprintln(w, "  ok: consistent")
	}
	for _, p := range s.Problems {
		fmt.Fprintf(w, "  PROBLEM %s: %s\n", p.Kind, p.Detail)
	}
	for kind, n := range s.Suppressed {
		fmt.Fprintf(w, "  PROBLEM %s: %d more\n", kind, n)
	}
	for _, d := range res.Derived {
		fmt.Fprintf(w, "%s: %d items", d.Name, d.Items)
		if d.Note != "" {
			fmt.Fprintf(w, " (%s)", d.Note)
		}
		fmt.Fprintln(w)
		if len(d.Problems) == 0 {
			fmt.Fprintln(w, "  ok: matches the store")
		}
		for _, p := range d.Problems {
			fmt.Fprintf(w, "  PROBLEM %s\n", p)
		}
	}
	if res.OK() {
		fmt.Fprintln(w, "check: ok")
	} else {
		fmt.Fprintln(w, "check: PROBLEMS FOUND")
	}
}

func dlqCmd() *cobra.Command {
	var httpURL string
	cmd := &cobra.Command{
		Use:   "dlq list|show|replay|drop",
		Short: "Work the dead-letter queue: messages that could not be applied, with the reason",
		Long: `Messages that can never apply (malformed, invalid) and messages that kept
failing for max_deliver deliveries go to <prefix>.dlq.<stream> with the error
and the original payload; the stream flows on behind them. These commands
list them, show one with its payload, replay them to their original subject
(after fixing the cause) or drop them. IDs are the dead letters' sequence
numbers in the DLQ stream.`,
	}
	list := &cobra.Command{
		Use:   "list [--stream RLDS|CMS] [--limit N]",
		Short: "List dead letters, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stream, _ := cmd.Flags().GetString("stream")
			limit, _ := cmd.Flags().GetInt("limit")
			var page daemon.DLQList
			q := url.Values{"stream": {stream}, "limit": {fmt.Sprint(limit)}}
			if err := getJSON(httpURL, "/v1/dlq?"+q.Encode(), &page); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTREAM\tSEQ\tDELIVERIES\tAT\tSUBJECT\tERROR")
			for _, e := range page.Entries {
				fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%s\t%s\n", e.ID, e.Stream, e.Sequence, e.Deliveries,
					e.At.Format(time.RFC3339), e.Subject, oneLine(e.Error, 100))
			}
			if page.Next != 0 {
				fmt.Fprintf(tw, "… more from id %d\n", page.Next)
			}
			return tw.Flush()
		},
	}
	list.Flags().String("stream", "", "only this stream's dead letters (RLDS, CMS)")
	list.Flags().Int("limit", 100, "list at most this many")
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show one dead letter with its original payload",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var e daemon.DLQEntry
			if err := getJSON(httpURL, "/v1/dlq/"+url.PathEscape(args[0]), &e); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "id:         %d\nstream:     %s (seq %d)\nsubject:    %s\nmsg id:     %s\ndeliveries: %d\nat:         %s\nerror:      %s\npayload (%d bytes):\n%s\n",
				e.ID, e.Stream, e.Sequence, e.Subject, e.MsgID, e.Deliveries, e.At.Format(time.RFC3339Nano), e.Error, e.Size, e.Payload)
			return nil
		},
	}
	replay := &cobra.Command{
		Use:   "replay ID... | --all [--stream S]",
		Short: "Publish dead letters again to their original subject and remove them from the DLQ",
		RunE: func(cmd *cobra.Command, args []string) error {
			return dlqBulk(cmd, httpURL, http.MethodPost, "/replay", args)
		},
	}
	drop := &cobra.Command{
		Use:   "drop ID... | --all [--stream S]",
		Short: "Delete dead letters",
		RunE: func(cmd *cobra.Command, args []string) error {
			return dlqBulk(cmd, httpURL, http.MethodDelete, "", args)
		},
	}
	for _, c := range []*cobra.Command{replay, drop} {
		c.Flags().Bool("all", false, "every dead letter (of --stream)")
		c.Flags().String("stream", "", "with --all: only this stream's (RLDS, CMS)")
	}
	cmd.AddCommand(list, show, replay, drop)
	cmd.PersistentFlags().StringVar(&httpURL, "http", "http://127.0.0.1:8080", "daemon HTTP URL")
	keyFlag(cmd)
	return cmd
}

// dlqBulk replays (suffix "/replay", POST) or drops (DELETE) the dead
// letters named by args, or all of them.
func dlqBulk(cmd *cobra.Command, base, method, suffix string, args []string) error {
	all, _ := cmd.Flags().GetBool("all")
	stream, _ := cmd.Flags().GetString("stream")
	out := cmd.OutOrStdout()
	switch {
	case all && len(args) > 0:
		return errors.New("give IDs or --all, not both")
	case all:
		q := url.Values{"stream": {stream}, "all": {"true"}}
		path := "/v1/dlq"
		if suffix != "" {
			path += suffix
		}
		return apiCall(out, method, base, path+"?"+q.Encode(), nil)
	case len(args) == 0:
		return errors.New("give the IDs of the dead letters, or --all")
	}
	for _, id := range args {
		if err := apiCall(out, method, base, "/v1/dlq/"+url.PathEscape(id)+suffix, nil); err != nil {
			return fmt.Errorf("dead letter %s: %w", id, err)
		}
	}
	return nil
}

func backupCmd() *cobra.Command {
	var httpURL, out string
	cmd := &cobra.Command{
		Use:   "backup --out FILE",
		Short: "Back up the running daemon: a consistent snapshot of the store and the stream positions",
		Long: `backup asks the running daemon (POST /v1/backup) for a consistent snapshot
of its store, read at one instant while ingest goes on, together with each
stream's position (every message up to it is in the snapshot). The file ends
with a SHA-256 trailer; backup verifies the whole file before it keeps it.
Restore it with 'ctxgraph restore FILE --data DIR'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("--out is required")
			}
			tmp := out + ".partial"
			f, err := os.Create(tmp)
			if err != nil {
				return err
			}
			defer os.Remove(tmp)
			resp, err := http.Post(httpURL+"/v1/backup", "application/json", nil)
			if err != nil {
				f.Close()
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				f.Close()
				b, _ := io.ReadAll(resp.Body)
				return fmt.Errorf("backup: %s: %s", resp.Status, b)
			}
			n, err := io.Copy(f, resp.Body)
			if err == nil {
				err = f.Sync()
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("backup: %w", err)
			}
			m, err := daemon.VerifyBackup(tmp)
			if err != nil {
				return fmt.Errorf("backup: the daemon's answer is not a whole backup: %w", err)
			}
			if err := os.Rename(tmp, out); err != nil {
				return err
			}
			printManifest(cmd.OutOrStdout(), out, n, m)
			return nil
		},
	}
	cmd.Flags().StringVar(&httpURL, "http", "http://127.0.0.1:8080", "daemon HTTP URL")
	cmd.Flags().StringVar(&out, "out", "", "file to write the backup to")
	keyFlag(cmd)
	return cmd
}

func printManifest(w io.Writer, file string, size int64, m *daemon.BackupManifest) {
	fmt.Fprintf(w, "%s: %d bytes, taken %s\n", file, size, m.CreatedAt.Format(time.RFC3339))
	fmt.Fprintf(w, "  %d episodes, %d steps, %d spans, %d sessions\n", m.Counts.Episodes, m.Counts.Steps, m.Counts.Spans, m.Counts.Sessions)
	for _, p := range m.Positions {
		fmt.Fprintf(w, "  stream %s: applied through seq %d (stream at %d)\n", p.Stream, p.Applied, p.LastSeq)
	}
}

func restoreCmd() *cobra.Command {
	var data string
	var force bool
	cmd := &cobra.Command{
		Use:   "restore FILE --data DIR",
		Short: "Restore a backup into a data directory (the daemon stopped)",
		Long: `restore verifies FILE whole, then creates DIR/graph from it. If DIR already
holds a store, --force moves everything in DIR except the JetStream log
(DIR/jetstream) aside into DIR/pre-restore-<time>/. The next 'ctxgraph serve
--data DIR' rebuilds the derived indexes and, if DIR/jetstream is the log the
backup was taken from, re-consumes from the backup's position whatever
arrived after it; messages the backup already holds are recognised and
skipped.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if data == "" {
				return errors.New("--data is required")
			}
			m, err := daemon.Restore(args[0], data, force, nil)
			if err != nil {
				return err
			}
			st, _ := os.Stat(args[0])
			var size int64
			if st != nil {
				size = st.Size()
			}
			printManifest(cmd.OutOrStdout(), args[0], size, m)
			fmt.Fprintf(cmd.OutOrStdout(), "restored into %s\n", data)
			return nil
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "data directory to restore into")
	cmd.Flags().BoolVar(&force, "force", false, "move an existing store in DIR aside")
	return cmd
}

func forgetCmd() *cobra.Command {
	var httpURL, entity, id, typ, tenant, project, who, why string
	cmd := &cobra.Command{
		Use:   "forget --entity NAME --why REASON | --id ID --why REASON",
		Short: "Forget an entity: remove it, its edges and facts from every layer, and record who, when and why",
		Long: `forget removes one node (an entity by default) from the running daemon (as an
operator: --key or $CTXGRAPH_KEY when auth is on): the
node and its aliases, every edge and fact touching it, its place in episode
records, merge and fact records naming it, its vectors and keyword entries,
its name in stored steps' annotations, CMS spans and sessions. It records
who forgot it, when and why (GET /v1/forgotten), keeping a SHA-256 of the
name rather than the name.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if who == "" {
				who = os.Getenv("USER")
				if h, err := os.Hostname(); err == nil && who != "" {
					who += "@" + h
				}
			}
			out := cmd.OutOrStdout()
			switch {
			case why == "":
				return errors.New("--why is required: the record keeps the reason")
			case id != "" && entity != "":
				return errors.New("give --entity or --id, not both")
			case id != "":
				q := url.Values{"who": {who}, "why": {why}}
				return apiCall(out, http.MethodDelete, httpURL, "/v1/entities/"+url.PathEscape(id)+"?"+q.Encode(), nil)
			case entity != "":
				return apiCall(out, http.MethodPost, httpURL, "/v1/forget", daemon.ForgetRequest{
					Name: entity, Type: typ, Tenant: tenant, Project: project, Who: who, Why: why})
			}
			return errors.New("give --entity NAME or --id ID")
		},
	}
	f := cmd.Flags()
	f.StringVar(&httpURL, "http", "http://127.0.0.1:8080", "daemon HTTP URL")
	f.StringVar(&entity, "entity", "", "name (or alias) of the node to forget")
	f.StringVar(&id, "id", "", "id of the node to forget")
	f.StringVar(&typ, "type", "entity", "node type of --entity")
	f.StringVar(&tenant, "tenant", "", "tenant of --entity (default: default)")
	f.StringVar(&project, "project", "", "project of --entity (default: default)")
	f.StringVar(&who, "who", "", "who asks (default: $USER@host)")
	f.StringVar(&why, "why", "", "why it is forgotten (required)")
	keyFlag(cmd)
	return cmd
}

// getJSON GETs base+path from the daemon and decodes the answer into v.
func getJSON(base, path string, v any) error {
	var buf bytes.Buffer
	if err := apiCall(&buf, http.MethodGet, base, path, nil); err != nil {
		return err
	}
	return json.Unmarshal(buf.Bytes(), v)
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
