package daemon

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/ctxgraph/ctxgraph/planner"
	"github.com/ctxgraph/ctxgraph/planner/keyword"
)

// Retrieval strategies and keyword search over HTTP:
//
//	POST /v1/strategies  body: a planner request -> planner.Advice (which
//	                     strategy auto picks for it, and every strategy
//	                     rated with reasons)
//	POST /v1/search      body: a planner request (query, k, strategy
//	                     keyword|semantic|hybrid, roles, tenant, project)
//	                     -> planner.SearchResult (ranked hits, no expansion)
func init() {
	extraRoutes = append(extraRoutes, func(d *Daemon, mux *http.ServeMux) {
		mux.HandleFunc("POST /v1/strategies", d.httpStrategies)
		mux.HandleFunc("POST /v1/search", d.httpSearch)
	})
}

// openKeyword opens the keyword index's files under DATA/keyword (while
// the store loads): reused when it was closed cleanly, started anew
// otherwise. attachKeyword then reconciles it with the store; like the
// vector index it is built before ingest starts.
func (d *Daemon) openKeyword() error {
	t := time.Now()
	ix, err := keyword.OpenDisk(keyword.Options{
		Dir: filepath.Join(d.cfg.Data, "keyword"), Logger: d.log.With("component", "keyword"),
	})
	if err != nil {
		return fmt.Errorf("keyword index: %w", err)
	}
	d.keyword = ix
	d.log.Info("keyword index opened", "took", time.Since(t))
	return nil
}

// attachKeyword reconciles the opened keyword index with the loaded
// store and keeps it current.
func (d *Daemon) attachKeyword() error {
	t := time.Now()
	if err := d.keyword.Attach(d.store); err != nil {
		d.keyword = nil
		return fmt.Errorf("keyword index: %w", err)
	}
	d.log.Info("keyword index ready", "docs", d.keyword.Len(), "took", time.Since(t))
	return nil
}

// decodePlannerBody reads a planner request from an HTTP body, with the
// authenticated caller (auth on) as its principal.
func decodePlannerBody(r *http.Request) (*planner.Request, error) {
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	req, err := planner.DecodeRequest(body)
	if err != nil {
		return nil, err
	}
	callerOf(r).authorize(req)
	return req, nil
}

func (d *Daemon) httpStrategies(w http.ResponseWriter, r *http.Request) {
	req, err := decodePlannerBody(r)
	if err != nil {
		writeError(w, err)
		return
	}
	adv, err := d.planner.Advise(req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, adv)
}

func (d *Daemon) httpSearch(w http.ResponseWriter, r *http.Request) {
	req, err := decodePlannerBody(r)
	if err != nil {
		writeError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	res, err := d.planner.Search(ctx, req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
