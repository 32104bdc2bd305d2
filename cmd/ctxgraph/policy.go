package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ctxgraph/ctxgraph/cmd/internal/daemon"
	"github.com/ctxgraph/ctxgraph/particle"
)

func init() { extraCommands = append(extraCommands, policyCmd, keysCmd) }

// keyEnv holds the API key the client commands send (Authorization:
// Bearer) when the daemon has auth on.
const keyEnv = "CTXGRAPH_KEY"

// bearer adds the API key from CTXGRAPH_KEY to every request the client
// commands make to the daemon's HTTP API, unless one is set already.
type bearer struct{ base http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if k := os.Getenv(keyEnv); k != "" && r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+k)
	}
	return b.base.RoundTrip(r)
}

func init() { http.DefaultTransport = bearer{http.DefaultTransport} }

// keyFlag sets CTXGRAPH_KEY from --key for this process.
func keyFlag(cmd *cobra.Command) {
	var key string
	cmd.PersistentFlags().StringVar(&key, "key", "", "API key (default $"+keyEnv+")")
	prev := cmd.PersistentPreRunE
	cmd.PersistentPreRunE = func(c *cobra.Command, args []string) error {
		if key != "" {
			if err := os.Setenv(keyEnv, key); err != nil {
				return err
			}
		}
		if prev != nil {
			return prev(c, args)
		}
		return nil
	}
}

// targetFlags name what a rule governs.
type targetFlags struct {
	node, edge, edgeType, tag, scope, namespace string
}

func (t *targetFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&t.node, "node", "", "a node, by id or name (and every edge touching it)")
	f.StringVar(&t.edge, "edge", "", "one edge id")
	f.StringVar(&t.edgeType, "edge-type", "", "every edge of a type (causal, temporal, membership, policy, tool_use, assertion)")
	f.StringVar(&t.tag, "tag", "", "nodes with a tag and edges touching them (location:<name> also matches places)")
	f.StringVar(&t.scope, "scope", "", `a whole namespace "tenant/project", or "*"`)
	f.StringVar(&t.namespace, "namespace", "", "limit the rule to one tenant/project")
}

func (t *targetFlags) target() particle.Target {
	return particle.Target{Node: t.node, Edge: t.edge, EdgeType: particle.EdgeType(t.edgeType), Tag: t.tag, Scope: t.scope}
}

// policyCmd is `ctxgraph policy`: list, show, allow, deny, label,
// revoke, approve, reject, audit, denials — over the HTTP API.
func policyCmd() *cobra.Command {
	var httpURL string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "List and edit access policies live (the daemon's /v1/policies)",
		Long: `Policy rules allow, deny or label (sensitivity, portability) a node, an
edge, an edge type, a tag or a whole namespace. Deny beats allow; the most
specific allow decides. An edit applies to the very next request and is
audited with who, when and why. With auth on, edits need an operator key
(--key or $CTXGRAPH_KEY).

  ctxgraph policy deny --role visitor --edge-type tool_use --why "lab tour"
  ctxgraph policy allow --role lab-staff --tag location:lab --why "staff only"
  ctxgraph policy label --sensitivity personal --node "operator notebook" --why "..."
  ctxgraph policy revoke p-3f9a1c2b7d --why "tour over"`,
	}
	cmd.PersistentFlags().StringVar(&httpURL, "http", "http://127.0.0.1:8080", "daemon HTTP URL")
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print the daemon's JSON answer")
	keyFlag(cmd)
	call := func(c *cobra.Command, method, path string, body any, show func(io.Writer, []byte) error) error {
		if asJSON || show == nil {
			return apiCall(c.OutOrStdout(), method, httpURL, path, body)
		}
		var buf strings.Builder
		if err := apiCall(&buf, method, httpURL, path, body); err != nil {
			return err
		}
		return show(c.OutOrStdout(), []byte(buf.String()))
	}

	var status string
	list := &cobra.Command{
		Use: "list", Short: "List rules (--status active|pending|revoked|rejected)", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			q := ""
			if status != "" {
				q = "?status=" + url.QueryEscape(status)
			}
			return call(c, "GET", "/v1/policies"+q, nil, printRules)
		},
	}
	list.Flags().StringVar(&status, "status", "", "only rules with this status")

	show := &cobra.Command{
		Use: "show ID", Short: "Show a rule and its audit trail", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return call(c, "GET", "/v1/policies/"+url.PathEscape(args[0]), nil, nil)
		},
	}

	edit := func(effect particle.Effect, short string) *cobra.Command {
		var roles []string
		var why, sens string
		var portable string
		var tf targetFlags
		ec := &cobra.Command{
			Use: string(effect) + " [--role R]... TARGET --why TEXT", Short: short, Args: cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error {
				r := particle.Rule{Effect: effect, Roles: roles, Target: tf.target(), Namespace: tf.namespace,
					Sensitivity: particle.Sensitivity(sens)}
				if portable != "" {
					b, err := strconv.ParseBool(portable)
					if err != nil {
						return fmt.Errorf("--portable: %w", err)
					}
					r.Portable = &b
				}
				return call(c, "POST", "/v1/policies", daemon.PolicyRequest{Rule: &r, Why: why}, printEdit)
			},
		}
		f := ec.Flags()
		if effect == particle.EffectLabel {
			f.StringVar(&sens, "sensitivity", "", "public, personal or sensitive")
			f.StringVar(&portable, "portable", "", "false keeps items in their context and out of exports")
		} else {
			f.StringSliceVar(&roles, "role", nil, "role the rule names (repeatable)")
		}
		f.StringVar(&why, "why", "", "why (recorded in the audit log; required)")
		tf.add(ec)
		return ec
	}

	transition := func(name, method, suffix, short string) *cobra.Command {
		var why string
		tc := &cobra.Command{
			Use: name + " ID --why TEXT", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, args []string) error {
				return call(c, method, "/v1/policies/"+url.PathEscape(args[0])+suffix, daemon.PolicyRequest{Why: why}, printEdit)
			},
		}
		tc.Flags().StringVar(&why, "why", "", "why (recorded in the audit log; required)")
		return tc
	}

	var rule string
	var limit int
	var jsonl bool
	audit := &cobra.Command{
		Use: "audit", Short: "Print the audit log of policy edits (who, when, why, before/after)", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			q := url.Values{}
			if rule != "" {
				q.Set("rule", rule)
			}
			if limit > 0 {
				q.Set("limit", strconv.Itoa(limit))
			}
			if jsonl {
				q.Set("format", "jsonl")
				return rawGet(c.OutOrStdout(), httpURL+"/v1/policies/audit?"+q.Encode())
			}
			return call(c, "GET", "/v1/policies/audit?"+q.Encode(), nil, printAudit)
		},
	}
	audit.Flags().StringVar(&rule, "rule", "", "only this rule's entries")
	audit.Flags().IntVar(&limit, "limit", 0, "only the most recent N entries")
	audit.Flags().BoolVar(&jsonl, "jsonl", false, "export as JSON lines")

	var since time.Duration
	denials := &cobra.Command{
		Use: "denials", Short: "Print recorded denials (who, what, which rule)", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			q := url.Values{}
			if since > 0 {
				q.Set("since", time.Now().Add(-since).UTC().Format(time.RFC3339Nano))
			}
			if limit > 0 {
				q.Set("limit", strconv.Itoa(limit))
			}
			return call(c, "GET", "/v1/policies/denials?"+q.Encode(), nil, nil)
		},
	}
	denials.Flags().DurationVar(&since, "since", 0, "only denials in the last DURATION")
	denials.Flags().IntVar(&limit, "limit", 0, "only the most recent N")

	cmd.AddCommand(list, show,
		edit(particle.EffectAllow, "Allow only the given roles on a target (most specific allow wins)"),
		edit(particle.EffectDeny, "Deny roles a target (deny beats allow)"),
		edit(particle.EffectLabel, "Label a target's sensitivity or portability"),
		transition("revoke", "DELETE", "", "Revoke a rule (access as before it)"),
		transition("approve", "POST", "/approve", "Approve a pending (proposed) rule"),
		transition("reject", "POST", "/reject", "Reject a pending rule"),
		audit, denials)
	return cmd
}

// rawGet copies a GET answer to w.
func rawGet(w io.Writer, u string) error {
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

func printRules(w io.Writer, raw []byte) error {
	var rules []particle.Rule
	if err := json.Unmarshal(raw, &rules); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tEFFECT\tROLES\tTARGET\tBY\tWHY")
	for _, r := range rules {
		eff := string(r.Effect)
		if r.Effect == particle.EffectLabel {
			eff = "label:" + string(r.Sensitivity)
			if r.Portable != nil && !*r.Portable {
				eff += ",not-portable"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Status, eff, strings.Join(r.Roles, ","), r.Target, r.UpdatedBy, r.Why)
	}
	return tw.Flush()
}

func printEdit(w io.Writer, raw []byte) error {
	var a particle.AuditEntry
	if err := json.Unmarshal(raw, &a); err != nil {
		return err
	}
	st := ""
	if a.After != nil {
		st = string(a.After.Status)
	}
	_, err := fmt.Fprintf(w, "%s %s -> %s (by %s at %s: %s)\n", a.Op, a.RuleID, st, a.Who, a.At.Format(time.RFC3339), a.Why)
	return err
}

func printAudit(w io.Writer, raw []byte) error {
	var log []particle.AuditEntry
	if err := json.Unmarshal(raw, &log); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tWHO\tOP\tRULE\tBEFORE\tAFTER\tWHY")
	state := func(r *particle.Rule) string {
		if r == nil {
			return "-"
		}
		return fmt.Sprintf("%s %s %s %s", r.Status, r.Effect, strings.Join(r.Roles, ","), r.Target)
	}
	for _, a := range log {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.At.Format(time.RFC3339), a.Who, a.Op, a.RuleID, state(a.Before), state(a.After), a.Why)
	}
	return tw.Flush()
}
