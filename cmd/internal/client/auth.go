package client

import (
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
)

// Environment of the client commands' NATS credentials, for a daemon
// with auth on: a user and password, or an nkey seed file.
const (
	EnvNATSUser     = "CTXGRAPH_NATS_USER"
	EnvNATSPassword = "CTXGRAPH_NATS_PASSWORD"
	EnvNATSNKeySeed = "CTXGRAPH_NATS_NKEY_SEED" // path of a file holding the seed (SU...)
)

// AuthOptions are the NATS options of the credentials in the
// environment (none when it names none).
func AuthOptions() ([]nats.Option, error) {
	if seed := os.Getenv(EnvNATSNKeySeed); seed != "" {
		o, err := nats.NkeyOptionFromSeed(seed)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvNATSNKeySeed, err)
		}
		return []nats.Option{o}, nil
	}
	if u := os.Getenv(EnvNATSUser); u != "" {
		return []nats.Option{nats.UserInfo(u, os.Getenv(EnvNATSPassword))}, nil
	}
	return nil, nil
}
