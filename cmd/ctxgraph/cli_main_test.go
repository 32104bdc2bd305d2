package main

import (
	"os"
	"testing"
)

// cliEnv, set in a test binary's environment, makes the binary the
// ctxgraph command instead of running tests: a test that starts
// os.Executable() as `ctxgraph serve` (bench run's restart in a process
// of its own) gets the real command in a process of its own.
const cliEnv = "CTXGRAPH_TEST_BINARY_IS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(cliEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}
