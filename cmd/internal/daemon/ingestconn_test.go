package daemon

import (
	"maps"
	"net"
	"testing"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
)

// TestIngestConnectionIsLoopbackTCPAndSurvivesADrop: the ingest
// consumers pull over a TCP connection of their own to the embedded
// server's loopback address; when the server drops it, ingest resumes on
// reconnection, and the graph ends as a daemon's that never lost it: no
// step lost, none applied twice.
func TestIngestConnectionIsLoopbackTCPAndSurvivesADrop(t *testing.T) {
	msgs := readMessages(t, "episodes.jsonl")
	half := len(msgs) / 2

	ref := startDaemon(t, testConfig(t.TempDir()))
	rc := connect(t, ref)
	rc.publishAll(msgs)
	rc.waitApplied()
	want, wantEvidence := ref.Store().Counts(), evidence(ref.Store())

	d := startDaemon(t, testConfig(t.TempDir()))
	host, _, err := net.SplitHostPort(d.ingestNC.ConnectedAddr())
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		t.Fatalf("ingest connection to %q (%v), want a loopback TCP address", d.ingestNC.ConnectedAddr(), err)
	}
	c := connect(t, d)
	c.publishAll(msgs[:half])
	c.waitConsumed()

	id, err := d.ingestNC.GetClientID()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.ns.DisconnectClientByID(id); err != nil {
		t.Fatal(err)
	}
	c.publishAll(msgs[half:])
	c.waitApplied()
	deadline := time.Now().Add(10 * time.Second)
	for d.ingestNC.Stats().Reconnects == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if r := d.ingestNC.Stats().Reconnects; r == 0 {
		t.Errorf("the ingest connection never reconnected")
	}

	got := d.Store().Counts()
	if got.Steps != want.Steps || got.Episodes != want.Episodes || !maps.Equal(got.Nodes, want.Nodes) || !maps.Equal(got.Edges, want.Edges) {
		t.Errorf("after the drop: %+v, want %+v", got, want)
	}
	if e := evidence(d.Store()); e != wantEvidence {
		t.Errorf("after the drop: edges hold %d sightings, want %d", e, wantEvidence)
	}
}

// evidence is the sightings every edge of s holds, summed: a message
// applied twice adds to it.
func evidence(s *particle.Store) int64 {
	var n int64
	s.Read(func(r particle.Reader) {
		r.Edges(func(e *particle.Edge) bool {
			n += int64(e.Evidence)
			return true
		})
	})
	return n
}

// TestDialHost: a server listening on every address is reached on the
// loopback address of its family, one on an address there.
func TestDialHost(t *testing.T) {
	for listen, want := range map[string]string{
		"0.0.0.0": "127.0.0.1", "::": "::1", "127.0.0.1": "127.0.0.1", "10.1.2.3": "10.1.2.3", "::1": "::1",
	} {
		if got := dialHost(net.ParseIP(listen)).String(); got != want {
			t.Errorf("dialHost(%s) = %s, want %s", listen, got, want)
		}
	}
}
