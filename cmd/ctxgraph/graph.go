package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/ctxgraph/ctxgraph/cmd/internal/daemon"
	"github.com/ctxgraph/ctxgraph/particle"
)

func init() {
	extraCommands = append(extraCommands, diffCmd, introspectCmd, predicatesCmd, entitiesCmd)
}

// apiCall sends a JSON request to the daemon's HTTP API and prints the
// JSON answer (indented) to w; an error answer becomes the error.
func apiCall(w io.Writer, method, base, path string, body any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if u := os.Getenv("USER"); u != "" {
		req.Header.Set("X-Ctxgraph-User", u)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var eb daemon.ErrorBody
		if json.Unmarshal(raw, &eb) == nil && eb.Error.Message != "" {
			return fmt.Errorf("%s: %s", eb.Error.Code, eb.Error.Message)
		}
		return fmt.Errorf("%s: %s", resp.Status, raw)
	}
	var out bytes.Buffer
	if json.Indent(&out, raw, "", "  ") != nil {
		_, err = w.Write(raw)
		return err
	}
	out.WriteByte('\n')
	_, err = out.WriteTo(w)
	return err
}

func httpFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "http", "http://127.0.0.1:8080", "daemon HTTP URL")
}

func diffCmd() *cobra.Command {
	var base, from, to string
	var req daemon.DiffRequest
	cmd := &cobra.Command{
		Use:   "diff (--subject NAME | --query TEXT) --from T [--to T]",
		Short: "What was added, ended and superseded about a subject between two times (POST /v1/diff)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if req.From, err = time.Parse(time.RFC3339, from); err != nil {
				return fmt.Errorf("--from: %w", err)
			}
			if to != "" {
				if req.To, err = time.Parse(time.RFC3339, to); err != nil {
					return fmt.Errorf("--to: %w", err)
				}
			}
			return apiCall(cmd.OutOrStdout(), "POST", base, "/v1/diff", req)
		},
	}
	httpFlag(cmd, &base)
	f := cmd.Flags()
	f.StringVar(&req.Subject, "subject", "", "entity name, alias or id")
	f.StringVar(&req.Query, "query", "", "query whose answer's nodes are the subjects")
	f.StringVar(&from, "from", "", "start of the window (RFC 3339)")
	f.StringVar(&to, "to", "", "end of the window (RFC 3339; default now)")
	f.StringSliceVar(&req.Roles, "role", nil, "role of the asker (repeatable)")
	return cmd
}

func introspectCmd() *cobra.Command {
	var base string
	var roles []string
	cmd := &cobra.Command{
		Use:   "introspect [TOPIC]",
		Short: "What the graph knows: types, predicates, counts (GET /v1/introspect), or about one entity",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "/v1/introspect"
			if len(args) == 1 {
				path += "/" + url.PathEscape(args[0])
			}
			q := url.Values{"role": roles}
			return apiCall(cmd.OutOrStdout(), "GET", base, path+"?"+q.Encode(), nil)
		},
	}
	httpFlag(cmd, &base)
	cmd.Flags().StringSliceVar(&roles, "role", nil, "role of the asker (repeatable)")
	return cmd
}

func predicatesCmd() *cobra.Command {
	var base string
	cmd := &cobra.Command{Use: "predicates", Short: "List and configure the predicate registry"}
	list := &cobra.Command{
		Use: "list", Short: "List registered predicates", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return apiCall(cmd.OutOrStdout(), "GET", base, "/v1/predicates", nil)
		},
	}
	var e daemon.PredicateEdit
	var card, status string
	set := &cobra.Command{
		Use:   "set NAME --cardinality single|multi --status pending|active|deprecated [--scope S] [--alias A] --why TEXT",
		Short: "Create or update a predicate (operators)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e.Name = args[0]
			e.Cardinality, e.Status = particle.Cardinality(card), particle.PredicateStatus(status)
			return apiCall(cmd.OutOrStdout(), "PUT", base, "/v1/predicates", e)
		},
	}
	f := set.Flags()
	f.StringVar(&card, "cardinality", "multi", "single or multi")
	f.StringVar(&status, "status", "active", "pending, active or deprecated")
	f.StringVar(&e.Scope, "scope", particle.DefaultNamespace, `tenant/project, project, or "" for global`)
	f.StringSliceVar(&e.Aliases, "alias", nil, "alias (repeatable)")
	f.StringVar(&e.Why, "why", "", "reason, recorded")
	cmd.PersistentFlags().StringVar(&base, "http", "http://127.0.0.1:8080", "daemon HTTP URL")
	cmd.AddCommand(list, set)
	return cmd
}

func entitiesCmd() *cobra.Command {
	var base string
	cmd := &cobra.Command{Use: "entities", Short: "Merge entities and give them aliases"}
	var m daemon.MergeRequest
	merge := &cobra.Command{
		Use:   "merge SURVIVOR MERGED --why TEXT",
		Short: "Merge MERGED into SURVIVOR (names, aliases or ids); edges, facts and aliases move",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			m.Survivor, m.Merged = args[0], args[1]
			return apiCall(cmd.OutOrStdout(), "POST", base, "/v1/entities/merge", m)
		},
	}
	merge.Flags().StringVar(&m.Why, "why", "", "reason, recorded")
	alias := &cobra.Command{
		Use: "alias NODE_ID ALIAS", Short: "Make ALIAS resolve to the node", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return apiCall(cmd.OutOrStdout(), "POST", base, "/v1/entities/"+url.PathEscape(args[0])+"/aliases", map[string]string{"alias": args[1]})
		},
	}
	cmd.PersistentFlags().StringVar(&base, "http", "http://127.0.0.1:8080", "daemon HTTP URL")
	cmd.AddCommand(merge, alias)
	return cmd
}
