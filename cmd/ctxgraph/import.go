package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/ctxgraph/ctxgraph/cmd/internal/client"
	"github.com/ctxgraph/ctxgraph/cmd/internal/daemon"
	"github.com/ctxgraph/ctxgraph/cms"
)

// importCmd groups the dataset importers.
func importCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import",
		Short: "Import episode datasets through the live ingest path",
	}
	var pf publishFlags
	jsonl := &cobra.Command{
		Use:   "jsonl [flags] FILE...",
		Short: "Import newline-delimited JSON episodes in the wire format",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return publishJSONL(cmd.Context(), cmd.ErrOrStderr(), pf, args)
		},
	}
	pf.register(jsonl)
	pf.registerWire(jsonl)
	pf.registerSteps(jsonl)
	var sf publishFlags
	spans := &cobra.Command{
		Use:   "spans [flags] FILE...",
		Short: "Publish CMS spans (one JSON span per line) to <prefix>.cms.<level>",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return publishSpans(cmd.Context(), cmd.ErrOrStderr(), sf, args)
		},
	}
	sf.register(spans)
	sf.registerWire(spans)
	cmd.AddCommand(jsonl, spans, importRLDSCmd())
	return cmd
}

func publishSpans(ctx context.Context, stderr io.Writer, pf publishFlags, files []string) error {
	asMsgpack, err := pf.msgpack()
	if err != nil {
		return err
	}
	nc, js, err := client.Connect(pf.natsURL, "ctxgraph-import-spans")
	if err != nil {
		return err
	}
	defer nc.Close()
	pub := client.NewPublisher(js, pf.prefix, pf.rate)
	bad := 0
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
		line := 0
		for sc.Scan() {
			line++
			if len(sc.Bytes()) == 0 {
				continue
			}
			s, err := cms.Decode(sc.Bytes(), 0)
			if err != nil {
				bad++
				fmt.Fprintf(stderr, "skipped: %s:%d: %v\n", path, line, err)
				continue
			}
			body := append([]byte(nil), sc.Bytes()...)
			if asMsgpack {
				body = s.AppendMsgpack(nil)
			}
			if err := pub.PublishRaw(ctx, s.Subject(pf.prefix), s.ID, body); err != nil {
				f.Close()
				return err
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	if err := pub.Flush(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "published %d spans; %d already stored, %d bad lines skipped\n", pub.Sent, pub.Dups, bad)
	if pf.wait > 0 {
		if err := client.WaitApplied(ctx, js, pf.wait, map[string]string{daemon.StreamCMS: daemon.DurableCMS}); err != nil {
			return err
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d bad lines skipped", bad)
	}
	return nil
}
