package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/ctxgraph/ctxgraph/cmd/internal/client"
	"github.com/ctxgraph/ctxgraph/cmd/internal/daemon"
	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/planner/contentenc"
)

// contextCmd asks the planner.
func contextCmd() *cobra.Command {
	var natsURL, prefix string
	var req planner.Request
	var asJSON bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "context --query TEXT [flags]",
		Short: "Ask the planner for context and print the answer",
		Long: `Ask the planner over NATS (<prefix>.planner.context) and print the answer:
a summary, or with --json or another --format the answer as rendered.

The request asks for the answer in s2 (Accept-Encoding: s2); a daemon that
compresses it says so in Content-Encoding, and the answer is inflated before
it is printed. --format msgpack writes the MessagePack bytes, inflated, for a
file or a pipe.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body, err := json.Marshal(&req)
			if err != nil {
				return err
			}
			auth, err := client.AuthOptions()
			if err != nil {
				return err
			}
			nc, err := nats.Connect(natsURL, append([]nats.Option{nats.Name("ctxgraph-context")}, auth...)...)
			if err != nil {
				return fmt.Errorf("connect %s: %w", natsURL, err)
			}
			defer nc.Close()
			// The answer in s2 when the daemon writes it so (an older
			// one answers plain, which the decode passes through).
			ask := &nats.Msg{Subject: prefix + ".planner.context", Data: body, Header: nats.Header{contentenc.AcceptHeader: {contentenc.S2}}}
			reply, err := nc.RequestMsg(ask, timeout)
			if err != nil {
				return fmt.Errorf("planner request: %w", err)
			}
			if reply.Data, err = contentenc.Decode(nil, reply.Data, reply.Header.Get(contentenc.ContentHeader)); err != nil {
				return fmt.Errorf("planner answer: %w", err)
			}
			if reply.Header.Get("Status") != "" {
				var eb daemon.ErrorBody
				if json.Unmarshal(reply.Data, &eb) == nil {
					return fmt.Errorf("planner: %s: %s", eb.Error.Code, eb.Error.Message)
				}
				return fmt.Errorf("planner: %s", reply.Data)
			}
			if req.Format == "msgpack" { // binary: the bytes as they came, for a file or a pipe
				_, err := cmd.OutOrStdout().Write(reply.Data)
				return err
			}
			if asJSON || (req.Format != "" && req.Format != "json") {
				_, err := cmd.OutOrStdout().Write(append(reply.Data, '\n'))
				return err
			}
			var ans planner.Answer
			if err := json.Unmarshal(reply.Data, &ans); err != nil {
				return fmt.Errorf("decode answer: %w", err)
			}
			printAnswer(cmd.OutOrStdout(), &req, &ans)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&natsURL, "nats", "nats://127.0.0.1:4222", "daemon NATS URL")
	f.StringVar(&prefix, "prefix", "ctxgraph", "subject prefix")
	f.StringVar(&req.Query, "query", "", "query text")
	f.StringVar(&req.SessionID, "session", "", "context session id")
	f.StringSliceVar(&req.Goals, "goal", nil, "goal the planner pursues (repeatable)")
	f.StringSliceVar(&req.Tools, "tool", nil, "tool in play (repeatable)")
	f.StringSliceVar(&req.Entities, "entity", nil, "entity in play (repeatable)")
	f.StringVar(&req.Agent, "agent", "", "asking agent")
	f.StringSliceVar(&req.Roles, "role", nil, "role of the asker (repeatable)")
	f.StringVar(&req.Location, "location", "", "keep edges at this location")
	f.Float64Var(&req.MinConfidence, "min-confidence", 0, "drop edges below this confidence")
	f.BoolVar(&req.SameAgent, "same-agent", false, "only the asking agent's experience")
	f.IntVar(&req.K, "k", 10, "seeds from the vector prefilter")
	f.IntVar(&req.Hops, "hops", 1, "graph expansion depth")
	f.IntVar(&req.Budget, "budget", 256, "max nodes plus edges in the answer")
	f.StringVar(&req.Format, "format", "", "answer format: json (default), msgpack (binary, see planner/answer_msgpack.go), triples, cypher, turtle, text")
	f.StringVar(&req.Strategy, "strategy", "", "retrieval strategy: auto (default), semantic, keyword, graph, temporal, hybrid")
	f.BoolVar(&asJSON, "json", false, "print the raw JSON answer")
	f.DurationVar(&timeout, "timeout", 5*time.Second, "request timeout")
	return cmd
}

// printAnswer writes an answer for a person: the subgraph with
// provenance, unknowns, hypotheses and the context state summary.
func printAnswer(w io.Writer, req *planner.Request, a *planner.Answer) {
	fmt.Fprintf(w, "Context for %q — %d nodes, %d edges (strategy %s, %dµs)\n", req.Query, len(a.Nodes), len(a.Edges), a.Strategy, a.Timings.TotalUS)
	if a.StrategyReason != "" {
		fmt.Fprintf(w, "Strategy: %s\n", a.StrategyReason)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Nodes:")
	for _, n := range a.Nodes {
		mark := " "
		if n.Seed {
			mark = "*"
		}
		fmt.Fprintf(w, "  %s %-8s %-40s score %.3f belief %.2f", mark, n.Type, n.Name, n.Score, n.Belief)
		if len(n.Episodes) > 0 {
			fmt.Fprintf(w, "  episodes %s", strings.Join(lastN(n.Episodes, 3), ","))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "\nEdges (source -[predicate]-> target, confidence, salience, provenance):")
	for _, e := range a.Edges {
		hyp := ""
		if e.Hypothesis {
			hyp = " [hypothesis]"
		}
		fmt.Fprintf(w, "  %s -[%s]-> %s  conf %.2f sal %.2f%s\n", e.SourceName, e.Predicate, e.TargetName, e.Confidence, e.Salience, hyp)
		for _, p := range lastN(e.Provenance, 2) {
			switch {
			case p.CMSSpanID != "":
				fmt.Fprintf(w, "      from CMS span %s\n", p.CMSSpanID)
			case p.StepIndex != nil:
				fmt.Fprintf(w, "      from episode %s step %d (%s)\n", p.EpisodeID, *p.StepIndex, p.Agent)
			case p.EpisodeID != "":
				fmt.Fprintf(w, "      from episode %s (%s)\n", p.EpisodeID, p.Agent)
			}
		}
	}
	fmt.Fprintf(w, "\nUnknowns: %d", len(a.Unknowns))
	for _, u := range a.Unknowns {
		fmt.Fprintf(w, "  %s %q", u.Kind, u.Name)
	}
	fmt.Fprintf(w, "\nHypotheses: %d   Contradictions: %d   Truncated: %v\n", len(a.Hypotheses), len(a.Contradictions), a.Truncated)
	if cs := a.ContextState; cs != nil {
		fmt.Fprintf(w, "Context state vector: %d-d, norm %.3f, strongest dims", cs.Dim, cs.Norm)
		for _, d := range cs.Top {
			fmt.Fprintf(w, " [%d]=%.3f", d.Dim, d.Value)
		}
		fmt.Fprintln(w)
	}
	t := a.Timings
	fmt.Fprintf(w, "Timings (µs): embed %d, wait %d, prefilter %d, expand %d, rerank %d, stitch %d, total %d\n",
		t.EmbedUS, t.WaitUS, t.PrefilterUS, t.ExpandUS, t.RerankUS, t.StitchUS, t.TotalUS)
}

func lastN[T any](s []T, n int) []T {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
