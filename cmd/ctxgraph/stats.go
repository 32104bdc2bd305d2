package main

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"
)

// statsCmd prints GET /v1/stats.
func statsCmd() *cobra.Command {
	var httpURL string
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Print the daemon's counts and ingest progress (GET /v1/stats)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := &http.Client{Timeout: 5 * time.Second}
			resp, err := c.Get(httpURL + "/v1/stats")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(resp.Body)
				return fmt.Errorf("stats: %s: %s", resp.Status, b)
			}
			_, err = io.Copy(cmd.OutOrStdout(), resp.Body)
			return err
		},
	}
	cmd.Flags().StringVar(&httpURL, "http", "http://127.0.0.1:8080", "daemon HTTP URL")
	return cmd
}
