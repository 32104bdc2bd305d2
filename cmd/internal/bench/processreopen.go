package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"gopkg.in/yaml.v3"
)

// The restart in a process of its own (RunOptions.Serve). The reopen
// phase's own figure, reopen_s, starts a daemon again inside the bench's
// process, whose heap the ingest grew and the collector then gave back
// to the system: its load faults that memory in again, page by page.
// A daemon that restarts is a new process, the way an operator or a
// supervisor starts one, and its load marks the heap it fills for huge
// pages (memory.huge_pages): reopen.process_s times that, until the
// process's first planner answer over NATS.

// processStartLimit bounds the wait for the started process's first
// answer.
const processStartLimit = 5 * time.Minute

// servingLine is the daemon's log line once it serves, with its NATS URL
// and HTTP address.
var servingLine = regexp.MustCompile(`msg="ctxgraph serving" nats=(\S+) http=(\S+)`)

// startPhaseLine is a /metrics line of a start's phase.
var startPhaseLine = regexp.MustCompile(`(?m)^ctxgraph_start_phase_seconds\{phase="(\w+)"\} (\S+)$`)

// reopenProcess stops the in-process daemon and starts RunOptions.Serve
// on its data directory and configuration, timing the start until the
// process serves (reopen.process_serving_s) and until its first planner
// answer over NATS (reopen.process_s), with where its start's time went
// (reopen.process.start.PHASE_s); it records the process's resident
// memory then (reopen.process_rss_bytes; the bench's own beside it,
// reopen.process_bench_rss_bytes) and stops it with SIGINT, as an
// operator does.
func (r *runner) reopenProcess(ctx context.Context) error {
	if len(r.o.Serve) == 0 || r.d == nil {
		return nil
	}
	if err := r.shutdown(ctx); err != nil {
		return fmt.Errorf("shutdown before the restart in a process: %w", err)
	}
	runtime.GC()
	debug.FreeOSMemory() // the bench's memory is not the new process's
	r.fig["reopen.process_bench_rss_bytes"] = float64(rss())
	cfg, err := r.writeServeConfig()
	if err != nil {
		return err
	}
	defer os.Remove(cfg)

	args := append(r.o.Serve[1:len(r.o.Serve):len(r.o.Serve)], "--config", cfg, "--log-level", "info")
	cmd := exec.Command(r.o.Serve[0], args...)
	logs, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	t := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("restart in a process: %w", err)
	}
	served := make(chan []string, 1)
	tail := &lastLines{n: 20}
	logsRead := make(chan struct{})
	go func() {
		defer close(logsRead)
		sc := bufio.NewScanner(logs)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			tail.add(sc.Text())
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case served <- m[1:]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, logs)
	}()
	exited := make(chan error, 1)
	go func() {
		<-logsRead // Wait closes the pipe: only once it is read to its end
		exited <- cmd.Wait()
	}()
	stop := func() error {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-exited:
			return err
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			return fmt.Errorf("the restarted process did not stop a minute after SIGINT")
		}
	}

	var addrs []string // NATS URL, HTTP address
	select {
	case addrs = <-served:
	case err := <-exited:
		return fmt.Errorf("the restarted process exited before serving (%v): %s", err, tail)
	case <-time.After(processStartLimit):
		_ = cmd.Process.Kill()
		return fmt.Errorf("the restarted process did not serve within %v: %s", processStartLimit, tail)
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return ctx.Err()
	}
	r.fig["reopen.process_serving_s"] = time.Since(t).Seconds()
	if err := r.firstAnswerOver(ctx, addrs[0], t.Add(processStartLimit)); err != nil {
		_ = stop()
		return err
	}
	r.fig["reopen.process_s"] = time.Since(t).Seconds()
	r.fig["reopen.process_rss_bytes"] = float64(procKB(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid), "VmRSS"))
	if err := r.processStartPhases(ctx, addrs[1]); err != nil {
		_ = stop()
		return err
	}
	if err := stop(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			return err
		}
		return fmt.Errorf("the restarted process's shutdown: %v: %s", err, tail)
	}
	r.say("restarted in a process of its own (%s serve): serving after %.2fs, its first planner answer over NATS after %.2fs; RSS then %.0f MB (the bench's own %.0f MB)",
		filepath.Base(r.o.Serve[0]), r.fig["reopen.process_serving_s"], r.fig["reopen.process_s"], r.fig["reopen.process_rss_bytes"]/1e6, r.fig["reopen.process_bench_rss_bytes"]/1e6)
	return nil
}

// processStartPhases reads where the restarted process's start went
// from its /metrics at addr (ctxgraph_start_phase_seconds), as
// reopen.process.start.PHASE_s beside the in-process reopen's
// reopen.start.PHASE_s.
func (r *runner) processStartPhases(ctx context.Context, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("the restarted process's metrics: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("the restarted process's metrics: %w", err)
	}
	phases := startPhaseLine.FindAllSubmatch(b, -1)
	if len(phases) == 0 {
		return fmt.Errorf("the restarted process's metrics hold no start phase")
	}
	for _, m := range phases {
		v, err := strconv.ParseFloat(string(m[2]), 64)
		if err != nil {
			return fmt.Errorf("the restarted process's start phase %s: %w", m[1], err)
		}
		r.fig["reopen.process.start."+string(m[1])+"_s"] = v
	}
	return nil
}

// writeServeConfig writes the run's daemon configuration (its data
// directory and loopback addresses included) to a temporary file for
// the restarted process.
func (r *runner) writeServeConfig() (string, error) {
	b, err := yaml.Marshal(&r.cfg)
	if err != nil {
		return "", fmt.Errorf("the daemon's configuration: %w", err)
	}
	f, err := os.CreateTemp("", "ctxgraph-bench-serve-*.yaml")
	if err != nil {
		return "", err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), f.Close()
}

// firstAnswerOver asks the daemon at url the first workload query over
// NATS until it answers with an answer (not an error), by deadline.
func (r *runner) firstAnswerOver(ctx context.Context, url string, deadline time.Time) error {
	nc, err := nats.Connect(url, nats.Name("ctxgraph-bench-restart"))
	if err != nil {
		return fmt.Errorf("connect to the restarted process: %w", err)
	}
	defer nc.Close()
	body, err := json.Marshal(&r.qs[0].Request)
	if err != nil {
		return err
	}
	subj := r.prefix + ".planner.context"
	for {
		m, err := nc.RequestWithContext(ctx, subj, body)
		switch {
		case err != nil:
		case m.Header.Get("Status") != "":
			err = fmt.Errorf("status %s: %s", m.Header.Get("Status"), m.Data)
		default:
			if err = checkAnswer(m.Data, "json"); err == nil {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no planner answer from the restarted process: %w", err)
		}
		time.Sleep(time.Millisecond)
	}
}

// lastLines keeps the last n lines written, for an error message.
type lastLines struct {
	mu    sync.Mutex
	n     int
	lines []string
}

func (l *lastLines) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == l.n {
		l.lines = l.lines[1:]
	}
	l.lines = append(l.lines, s)
}

func (l *lastLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, _ := json.Marshal(l.lines)
	return string(b)
}
