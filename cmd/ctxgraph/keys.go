package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ctxgraph/ctxgraph/cmd/internal/daemon"
	"github.com/ctxgraph/ctxgraph/particle"
)

// keysCmd is `ctxgraph keys create|list|revoke`: API keys, through a
// running daemon (--http, as an operator) or directly on the data
// directory of a stopped one (--data: how the first operator key is
// made without a bootstrap key).
func keysCmd() *cobra.Command {
	var httpURL, dataDir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Create, list and revoke API keys (stored hashed; the secret is shown once)",
		Long: `API keys authenticate HTTP callers (Authorization: Bearer KEY) when auth is
on; each maps to a principal: roles, an agent, a subject, a shared flag.

Through a running daemon, as an operator (--key or $CTXGRAPH_KEY, or the
bootstrap key of auth.bootstrap_key_env):
  ctxgraph keys create --name tour-guest --role visitor --ttl 8h
On a stopped daemon's data directory (the first operator key):
  ctxgraph keys create --data ./ctxgraph-data --name alice --role operator`,
	}
	cmd.PersistentFlags().StringVar(&httpURL, "http", "http://127.0.0.1:8080", "daemon HTTP URL")
	cmd.PersistentFlags().StringVar(&dataDir, "data", "", "work on this stopped daemon's data directory instead")
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print JSON")
	keyFlag(cmd)

	// offline runs fn on the store of a stopped daemon.
	offline := func(fn func(s *particle.Store) error) error {
		o := particle.DefaultOptions(filepath.Join(dataDir, "graph"))
		if _, err := os.Stat(o.Dir); err != nil {
			return fmt.Errorf("no graph under %s: %w", dataDir, err)
		}
		s, err := particle.Open(o)
		if err != nil {
			return fmt.Errorf("open %s (is the daemon still running?): %w", o.Dir, err)
		}
		return joinErr(fn(s), s.Close())
	}
	who := func() string {
		if u := os.Getenv("USER"); u != "" {
			return u + " (offline)"
		}
		return "offline"
	}

	var spec daemon.KeySpec
	var ttl time.Duration
	create := &cobra.Command{
		Use: "create --name NAME --role ROLE [flags]", Short: "Create a key and print it (once)", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			spec.TTL = daemon.Duration(ttl)
			var kc daemon.KeyCreated
			if dataDir != "" {
				err := offline(func(s *particle.Store) error {
					plain, k, err := daemon.CreateKey(c.Context(), s, spec, who())
					kc = daemon.KeyCreated{Key: plain, APIKey: k}
					return err
				})
				if err != nil {
					return err
				}
			} else {
				var buf strings.Builder
				if err := apiCall(&buf, "POST", httpURL, "/v1/keys", spec); err != nil {
					return err
				}
				if err := json.Unmarshal([]byte(buf.String()), &kc); err != nil {
					return err
				}
			}
			if asJSON {
				return json.NewEncoder(c.OutOrStdout()).Encode(kc)
			}
			k := kc.APIKey
			fmt.Fprintf(c.OutOrStdout(), "%s\n", kc.Key)
			fmt.Fprintf(c.ErrOrStderr(), "key %s for %q, roles %s%s — keep it: it is not shown again\n",
				k.ID, k.Name, strings.Join(k.Roles, ","), expiry(k))
			return nil
		},
	}
	f := create.Flags()
	f.StringVar(&spec.Name, "name", "", "who or what the key is for (the subject unless --subject)")
	f.StringSliceVar(&spec.Roles, "role", nil, "role (repeatable)")
	f.StringVar(&spec.Agent, "agent", "", "the robot agent the key speaks for")
	f.StringVar(&spec.Subject, "subject", "", "the subject personal items are matched against (default: the name)")
	f.BoolVar(&spec.Shared, "shared", false, "a shared screen: sensitive items are left out")
	f.DurationVar(&ttl, "ttl", 0, "expire after this long (0: never)")

	list := &cobra.Command{
		Use: "list", Short: "List keys (never their secrets)", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var keys []*daemon.APIKey
			if dataDir != "" {
				if err := offline(func(s *particle.Store) (err error) { keys, err = daemon.ListKeys(s); return err }); err != nil {
					return err
				}
				for _, k := range keys {
					k.Hash = ""
				}
			} else {
				var buf strings.Builder
				if err := apiCall(&buf, "GET", httpURL, "/v1/keys", nil); err != nil {
					return err
				}
				if err := json.Unmarshal([]byte(buf.String()), &keys); err != nil {
					return err
				}
			}
			if asJSON {
				return json.NewEncoder(c.OutOrStdout()).Encode(keys)
			}
			return printKeys(c.OutOrStdout(), keys)
		},
	}

	revoke := &cobra.Command{
		Use: "revoke ID", Short: "Revoke a key for good", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if dataDir != "" {
				return offline(func(s *particle.Store) error {
					_, err := daemon.RevokeKey(context.Background(), s, args[0], who())
					return err
				})
			}
			return apiCall(c.OutOrStdout(), "DELETE", httpURL, "/v1/keys/"+url.PathEscape(args[0]), nil)
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func expiry(k *daemon.APIKey) string {
	if k.ExpiresAt.IsZero() {
		return ""
	}
	return ", expires " + k.ExpiresAt.Format(time.RFC3339)
}

func printKeys(w io.Writer, keys []*daemon.APIKey) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tROLES\tAGENT\tCREATED\tSTATE")
	now := time.Now()
	for _, k := range keys {
		state := "active"
		switch {
		case !k.RevokedAt.IsZero():
			state = "revoked " + k.RevokedAt.Format(time.RFC3339) + " by " + k.RevokedBy
		case !k.ExpiresAt.IsZero() && !now.Before(k.ExpiresAt):
			state = "expired"
		case !k.ExpiresAt.IsZero():
			state = "expires " + k.ExpiresAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, strings.Join(k.Roles, ","), k.Agent, k.CreatedAt.Format(time.RFC3339), state)
	}
	return tw.Flush()
}
