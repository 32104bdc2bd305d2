package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ctxgraph/ctxgraph/particle"
	"github.com/ctxgraph/ctxgraph/planner/contentenc"
	"github.com/ctxgraph/ctxgraph/session"
)

// routes is the HTTP API; it mirrors the NATS subjects.
func (d *Daemon) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/context", d.httpContext)
	mux.HandleFunc("GET /v1/nodes/{id}", d.httpNode)
	mux.HandleFunc("GET /v1/edges/{id}", d.httpEdge)
	mux.HandleFunc("GET /v1/episodes/{id}", d.httpEpisode)
	mux.HandleFunc("POST /v1/sessions", d.httpSessionCreate)
	mux.HandleFunc("GET /v1/sessions", d.httpSessionList)
	mux.HandleFunc("GET /v1/sessions/{id}", d.httpSessionGet)
	mux.HandleFunc("PATCH /v1/sessions/{id}", d.httpSessionUpdate)
	mux.HandleFunc("GET /v1/stats", d.httpStats)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", d.httpReady)
	mux.Handle("GET /metrics", promhttp.HandlerFor(d.metrics.reg, promhttp.HandlerOpts{}))
	if d.cfg.HTTP.Pprof {
		routePprof(mux)
	}
	for _, add := range extraRoutes {
		add(d, mux)
	}
	return d.secureHTTP(checkScopeParams(mux))
}

// routePprof serves Go's profiles of the running daemon under
// /debug/pprof/ (http.pprof), for `go tool pprof`: a CPU profile over
// ?seconds=N, the heap in use and allocated, goroutines, and an
// execution trace. (The mutex and block profiles stay empty: the daemon
// does not turn on their sampling.)
func routePprof(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}

// checkScopeParams refuses, with a 400, a request whose tenant or
// project query parameter cannot name a namespace (particle.CheckScope),
// before any handler reads them (namespaceOf).
func checkScopeParams(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if _, err := requestNamespace(q.Get("tenant"), q.Get("project")); err != nil {
			writeError(w, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requestNamespace is the namespace a request's tenant and project
// name, or a bad request if they cannot name one (particle.CheckScope).
func requestNamespace(tenant, project string) (string, error) {
	if err := particle.CheckScope(tenant, project); err != nil {
		return "", fmt.Errorf("%w: %v", errBadRequest, err)
	}
	return particle.Namespace(tenant, project), nil
}

// extraRoutes are route groups that files of this package register in
// init (export, policies, introspection, ...).
var extraRoutes []func(d *Daemon, mux *http.ServeMux)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	status, body := errorBody(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// readBody reads at most maxRequestBytes of r's body.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxRequestBytes))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, fmt.Errorf("%w: body over %d bytes", errTooLarge, maxRequestBytes)
	}
	return b, err
}

// namespaceOf is the namespace of r's tenant and project query
// parameters, which checkScopeParams has checked.
func namespaceOf(r *http.Request) string {
	return particle.Namespace(r.URL.Query().Get("tenant"), r.URL.Query().Get("project"))
}

func (d *Daemon) httpContext(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		writeError(w, err)
		return
	}
	out, ctype, err := d.plan(r.Context(), callerOf(r), body)
	if err != nil {
		writeError(w, err)
		return
	}
	out, coding, release, err := encodeReply(out, r.Header.Values(contentenc.AcceptHeader))
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Add("Vary", contentenc.AcceptHeader)
	if coding != "" {
		h.Set(contentenc.ContentHeader, coding)
	}
	_, _ = w.Write(out)
}

func (d *Daemon) httpNode(w http.ResponseWriter, r *http.Request) {
	n, err := d.store.ResolveNode(r.PathValue("id"))
	if err == nil {
		n, err = d.visibleNode(r.Context(), callerOf(r), principalOf(r), n)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, n)
}

func (d *Daemon) httpEdge(w http.ResponseWriter, r *http.Request) {
	e, err := d.store.Edge(r.PathValue("id"))
	if err == nil {
		e, err = d.visibleEdge(r.Context(), callerOf(r), principalOf(r), e)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, e)
}

func (d *Daemon) httpEpisode(w http.ResponseWriter, r *http.Request) {
	e, err := d.store.Episode(namespaceOf(r), r.PathValue("id"))
	if err == nil {
		e, err = d.visibleEpisode(r.Context(), callerOf(r), principalOf(r), e)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, e)
}

func (d *Daemon) httpSessionCreate(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var s session.Session
	if len(body) > 0 {
		if err := json.Unmarshal(body, &s); err != nil {
			writeError(w, fmt.Errorf("%w: malformed JSON: %v", errBadRequest, err))
			return
		}
	}
	if s.Namespace == "" {
		s.Namespace = namespaceOf(r)
	}
	out, err := d.sessions.Create(r.Context(), s)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

func (d *Daemon) httpSessionList(w http.ResponseWriter, r *http.Request) {
	out, err := d.sessions.List(r.Context(), namespaceOf(r))
	if err != nil {
		writeError(w, err)
		return
	}
	if out == nil {
		out = []*session.Session{}
	}
	writeJSON(w, http.StatusOK, out)
}

func (d *Daemon) httpSessionGet(w http.ResponseWriter, r *http.Request) {
	out, err := d.sessions.Get(r.Context(), namespaceOf(r), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (d *Daemon) httpSessionUpdate(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var p session.Patch
	if err := json.Unmarshal(body, &p); err != nil {
		writeError(w, fmt.Errorf("%w: malformed JSON: %v", errBadRequest, err))
		return
	}
	out, err := d.sessions.Update(r.Context(), namespaceOf(r), r.PathValue("id"), p)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// Stats is the body of GET /v1/stats.
type Stats struct {
	Counts  particle.Counts          `json:"counts"`
	Vectors int                      `json:"vectors"`
	Ingest  map[string]ConsumerStats `json:"ingest"`
	Uptime  string                   `json:"uptime"`
}

// ConsumerStats is one stream's ingest progress.
type ConsumerStats struct {
	Applied      int64  `json:"applied"`
	DeadLettered int64  `json:"dead_lettered"`
	Pending      uint64 `json:"pending"`
	AckPending   int    `json:"ack_pending"`
}

func (d *Daemon) stats(r *http.Request) Stats {
	st := Stats{Ingest: map[string]ConsumerStats{}}
	st.Counts, st.Vectors = d.visibleCounts(principalOf(r))
	for _, c := range d.consumers {
		cs := ConsumerStats{Applied: c.applied.Load(), DeadLettered: c.failed.Load()}
		if info, err := d.js.Consumer(r.Context(), c.stream, c.durable); err == nil {
			if ci, err := info.Info(r.Context()); err == nil {
				cs.Pending, cs.AckPending = ci.NumPending, ci.NumAckPending
			}
		}
		st.Ingest[c.stream] = cs
	}
	return st
}

func (d *Daemon) httpStats(w http.ResponseWriter, r *http.Request) {
	st := d.stats(r)
	st.Uptime = fmtDuration(d.started)
	writeJSON(w, http.StatusOK, st)
}

func (d *Daemon) httpReady(w http.ResponseWriter, _ *http.Request) {
	checks := map[string]bool{
		"serving": d.ready.Load(),
		"nats":    d.nc != nil && d.nc.IsConnected() && d.ingestNC != nil && d.ingestNC.IsConnected(),
		"storage": d.storeOK.Load(),
	}
	status := http.StatusOK
	for _, ok := range checks {
		if !ok {
			status = http.StatusServiceUnavailable
		}
	}
	writeJSON(w, status, checks)
}
