package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ctxgraph/ctxgraph/cmd/internal/client"
	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner"
)

// buildBinary builds cmd/ctxgraph into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ctxgraph")
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(goBin, "build", "-o", bin, "github.com/ctxgraph/ctxgraph/cmd/ctxgraph").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// proc is a daemon running as a child process on fixed ports.
type proc struct {
	t                  *testing.T
	bin, config, data  string
	natsAddr, httpAddr string
	log                *os.File
	cmd                *exec.Cmd
}

// startProc starts the daemon binary with the configuration conf, on a
// new data directory, its log beside it; it is killed at the test's end
// if still running.
func startProc(t *testing.T, conf string) *proc {
	t.Helper()
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "ctxgraph.yaml")
	if err := os.WriteFile(cfgFile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	p := &proc{t: t, bin: buildBinary(t), config: cfgFile, data: filepath.Join(dir, "data"),
		natsAddr: freePort(t), httpAddr: freePort(t), log: logf}
	p.start()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	return p
}

func (p *proc) start() {
	p.t.Helper()
	p.cmd = exec.Command(p.bin, "serve", "--config", p.config, "--data", p.data,
		"--nats-addr", p.natsAddr, "--http-addr", p.httpAddr, "--log-level", "warn")
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + p.httpAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("daemon not ready after a minute; log in %s", p.log.Name())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *proc) kill() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Fatal(err)
	}
	p.cmd.Wait()
}

func (p *proc) stop() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		p.t.Fatalf("daemon exited with %v; log in %s", err, p.log.Name())
	}
}

// metric reads a gauge of the daemon's /metrics (NaN when absent).
func (p *proc) metric(name string) float64 {
	p.t.Helper()
	resp, err := http.Get("http://" + p.httpAddr + "/metrics")
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				p.t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return math.NaN()
}

// check runs `ctxgraph check` on the data dir and fails on problems.
func (p *proc) check(when string) {
	p.t.Helper()
	out, err := exec.Command(p.bin, "check", "--config", p.config, "--data", p.data).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "check: ok") {
		p.t.Fatalf("ctxgraph check %s: %v\n%s", when, err, out)
	}
	p.t.Logf("ctxgraph check %s:\n%s", when, out)
}

// crashPublisher is one robot controller: it streams episodes, retrying
// each message until the daemon acknowledges it (across crashes), and
// remembers every step whose publish was acknowledged.
type crashPublisher struct {
	bot   client.Synthetic
	acked map[string]map[int]bool // episode -> step indexes
	sent  int
}

func (cp *crashPublisher) run(t *testing.T, url string, steps int, stop <-chan struct{}) {
	nc, err := nats.Connect(url, nats.Name(cp.bot.Agent), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond),
		nats.RetryOnFailedConnect(true), nats.Timeout(time.Second))
	if err != nil {
		t.Error(err)
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Error(err)
		return
	}
	publish := func(m []byte, subj, id string) {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := js.Publish(ctx, subj, m, jetstream.WithMsgID(id))
			cancel()
			if err == nil {
				return
			}
			time.Sleep(10 * time.Millisecond) // the daemon is down: retry, same msg id
		}
	}
	for e := 0; ; e++ {
		select {
		case <-stop:
			return
		default:
		}
		ep := fmt.Sprintf("%s-ep%d", cp.bot.Agent, e)
		t0 := time.Now()
		for _, m := range cp.bot.Episode(ep, steps, t0) {
			body, _ := json.Marshal(m)
			publish(body, m.Subject("ctxgraph"), m.MsgID())
			cp.sent++
			if m.Step != nil {
				if cp.acked[ep] == nil {
					cp.acked[ep] = map[int]bool{}
				}
				cp.acked[ep][m.Step.Index] = true
			}
		}
	}
}

// TestCrashSafety runs the daemon as a process, streams steps into it
// from several publishers, SIGKILLs it at random moments (seeded: set
// CTXGRAPH_CRASH_SEED to replay a run, CTXGRAPH_CRASH_KILLS for a longer
// one), restarts it on the same data directory each time, and then
// checks that every step whose publish was acknowledged is in the graph
// exactly once and that the store and its derived indexes are consistent
// (ctxgraph check, after a crash and at the end).
func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a daemon process")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CTXGRAPH_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	kills := 10
	if s := os.Getenv("CTXGRAPH_CRASH_KILLS"); s != "" {
		kills, _ = strconv.Atoi(s)
	}
	t.Logf("seed %d (CTXGRAPH_CRASH_SEED=%d replays this run), %d kills", seed, seed, kills)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	// Short ack wait: messages in flight at a kill come back quickly.
	// Checkpoints every few hundred records, looked for every 100 ms:
	// kills land before, during and after them.
	p := startProc(t, "ingest:\n  ack_wait: 2s\n  backoff: 20ms\n  batch_size: 64\n"+
		"storage:\n  checkpoints:\n    view_records: 250\n    vector_records: 200\n    keyword_records: 100\n    check: 100ms\n")

	stop := make(chan struct{})
	var pubs []*crashPublisher
	var wg sync.WaitGroup
	for i := range 4 {
		cp := &crashPublisher{bot: client.Synthetic{Agent: fmt.Sprintf("crash-%c", 'a'+i)}, acked: map[string]map[int]bool{}}
		pubs = append(pubs, cp)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cp.run(t, "nats://"+p.natsAddr, 25, stop)
		}()
	}
	// A clean restart first: it saves the view's and the vector index's
	// snapshots, which each start after a kill below loads and catches
	// up with what the dead runs committed since.
	time.Sleep(300 * time.Millisecond)
	p.stop()
	p.start()
	viewCaughtUp, vectorsCaughtUp := 0, 0
	checkpoints := map[string]float64{}
	for k := range kills {
		time.Sleep(time.Duration(100+rng.IntN(900)) * time.Millisecond)
		for _, part := range []string{partView, partVectors, partKeyword} {
			if n := p.metric(`ctxgraph_checkpoints_total{part="` + part + `",result="ok"}`); n > 0 {
				checkpoints[part] += n
			}
		}
		p.kill()
		if k == kills/2 {
			p.check(fmt.Sprintf("after kill %d", k+1)) // a crashed store, recovered by opening it
		}
		p.start()
		if p.metric("ctxgraph_store_view_caught_up_records") > 0 {
			viewCaughtUp++
		}
		if p.metric("ctxgraph_vector_index_caught_up_records") > 0 {
			vectorsCaughtUp++
		}
	}
	t.Logf("of %d starts after a kill, %d caught the view up from its snapshot, %d the vector index; %v checkpoints before the kills", kills, viewCaughtUp, vectorsCaughtUp, checkpoints)
	if viewCaughtUp == 0 || vectorsCaughtUp == 0 {
		t.Errorf("no start after a kill caught up from the snapshots: view %d, vectors %d", viewCaughtUp, vectorsCaughtUp)
	}
	if checkpoints[partView] == 0 || checkpoints[partVectors] == 0 || checkpoints[partKeyword] == 0 {
		t.Errorf("checkpoints between the kills: %v; want some of each part", checkpoints)
	}
	close(stop)
	wg.Wait()

	// Everything published is applied; nothing was dead-lettered.
	nc, js, err := client.Connect("nats://"+p.natsAddr, "crash-test")
	if err != nil {
		t.Fatal(err)
	}
	err = client.WaitApplied(context.Background(), js, 60*time.Second, map[string]string{StreamRLDS: DurableRLDS})
	nc.Close()
	if err != nil {
		t.Fatal(err)
	}
	var dlq DLQList
	if err := getJSONURL("http://"+p.httpAddr+"/v1/dlq", &dlq); err != nil || len(dlq.Entries) != 0 {
		t.Errorf("dead letters after the crashes: %+v %v", dlq.Entries, err)
	}
	p.stop()
	p.check("at the end")

	// Every acknowledged step is stored, and every stored step was
	// applied exactly once: the agent's uses-tool edge has one piece of
	// evidence per stored step.
	o := particle.DefaultOptions(filepath.Join(p.data, "graph"))
	s, err := particle.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	total, acked := 0, 0
	for _, cp := range pubs {
		stored := 0
		var episodes []string
		s.Read(func(r particle.Reader) {
			r.Episodes(func(ep *particle.Episode) bool {
				if ep.Agent == cp.bot.Agent {
					episodes = append(episodes, ep.ID)
				}
				return true
			})
		})
		for _, ep := range episodes {
			have := map[int]bool{}
			if err := s.Steps(particle.DefaultNamespace, ep, func(idx int, _ []byte) error {
				have[idx] = true
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			stored += len(have)
			for idx := range cp.acked[ep] {
				if !have[idx] {
					t.Errorf("%s step %d was acknowledged but is not in the graph", ep, idx)
				}
			}
		}
		for ep, idxs := range cp.acked {
			acked += len(idxs)
			if _, err := s.Episode(particle.DefaultNamespace, ep); err != nil {
				t.Errorf("episode %s with %d acknowledged steps is missing: %v", ep, len(idxs), err)
			}
		}
		assertUsesEvidence(t, s, cp.bot, stored)
		total += stored
	}
	if got := s.Counts().Steps; got != int64(total) {
		t.Errorf("recorded step count %d, stored %d", got, total)
	}
	t.Logf("%d kills: %d steps acknowledged, %d stored, each applied once", kills, acked, total)
	if acked == 0 {
		t.Error("no step was acknowledged: the test tested nothing")
	}
}

func getJSONURL(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// TestSplitsSurviveACrashStart kills a daemon that ran with no vector
// checkpoint after a start that read the IVF's splits from their
// snapshot: the next start reads them again, leaving out what changed
// since, instead of filling them from the index's lists, and answers
// same-agent and windowed queries as the dead run did.
func TestSplitsSurviveACrashStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a daemon process")
	}
	p := startProc(t, "storage:\n  checkpoints:\n    vector_records: 0\n")
	msgs := readMessages(t, "episodes.jsonl")
	c := p.connect()
	c.publishAll(msgs[:len(msgs)/2])
	p.waitIndexed(c)
	p.stop() // saves the index and its splits

	p.start()
	p.waitSplits("the start after a clean shutdown")
	c = p.connect()
	c.publishAll(msgs[len(msgs)/2:])
	p.waitIndexed(c)
	forgotten := particle.EntityID(particle.DefaultNamespace, particle.NodeEntity, "red block")
	req, _ := http.NewRequest("DELETE", "http://"+p.httpAddr+"/v1/entities/"+forgotten+"?why=test", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("forget: %v %v", resp, err)
	}
	resp.Body.Close()
	p.waitIndexed(c)
	sameAgent := planner.Request{Query: "where is the blue bowl", Entities: []string{"blue bowl"}, Hops: 1, K: 10, Budget: 200, SameAgent: true, Agent: "ur5-alpha"}
	windowed := sameAgent
	windowed.SameAgent, windowed.Agent = false, ""
	at := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	windowed.TimeWindow = &planner.TimeWindow{From: at.Add(-30 * time.Minute), To: at.Add(20 * time.Minute)}
	asked := func(c *controller) string {
		return answerShape(c.ask(sameAgent)) + "\n--- windowed\n" + answerShape(c.ask(windowed))
	}
	if a := c.ask(windowed); len(a.Edges) == 0 {
		t.Fatal("the windowed query finds no edge: it tests nothing")
	}
	before := asked(c)
	c.nc.Close()
	p.kill() // no vector checkpoint ran: the snapshots are the clean shutdown's

	p.start()
	if n := p.metric("ctxgraph_vector_index_caught_up_records"); !(n > 0) {
		t.Fatalf("the start after the kill caught the vector index up with %v records; want the second half's", n)
	}
	p.waitSplits("the start after the kill")
	if got := asked(p.connect()); got != before {
		t.Errorf("answers after the crash start differ:\n%s\nwant\n%s", got, before)
	}
	p.stop()
}

// connect is a controller of p's daemon over NATS (its methods that
// need the daemon in-process are not for it).
func (p *proc) connect() *controller {
	p.t.Helper()
	nc, js, err := client.Connect("nats://"+p.natsAddr, "crash-test")
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(nc.Close)
	return &controller{t: p.t, nc: nc, js: js}
}

// waitIndexed waits until p's daemon has applied everything published
// and its vector index has held the same number of vectors for a
// second.
func (p *proc) waitIndexed(c *controller) {
	p.t.Helper()
	c.waitConsumed()
	last, since := math.NaN(), time.Now()
	for deadline := time.Now().Add(30 * time.Second); time.Since(since) < time.Second; time.Sleep(50 * time.Millisecond) {
		if n := p.metric("ctxgraph_vector_index_size"); n != last {
			last, since = n, time.Now()
		}
		if time.Now().After(deadline) {
			p.t.Fatal("the vector index is still changing 30 s after ingest")
		}
	}
}

// waitSplits waits until p's daemon has both splits ready, read from
// their snapshot; it fails if they are not within 30 s (filled from the
// index instead, or slower).
func (p *proc) waitSplits(when string) {
	p.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		agent, window := p.metric(`ctxgraph_vector_index_split_ready{split="agent"}`), p.metric(`ctxgraph_vector_index_split_ready{split="time"}`)
		read := p.metric("ctxgraph_vector_index_splits_from_snapshot")
		if agent == 1 && window == 1 && read == 1 {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: after 30 s the splits are ready by agent %v, by time %v; read from their snapshot %v (want 1, 1, 1)", when, agent, window, read)
		}
	}
}
