package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/ctxgraph/ctxgraph/rlds/arrowexport"
)

func init() {
	extraRoutes = append(extraRoutes, func(d *Daemon, mux *http.ServeMux) {
		mux.HandleFunc("GET /v1/export", d.httpExport)
	})
}

// Export response headers. The trailer carries the row count once the
// body is complete: a client that reads it knows it got everything.
const (
	HeaderExportEstimate = "Ctxgraph-Export-Estimate"
	HeaderExportRows     = "Ctxgraph-Export-Rows"
)

// httpExport streams one table as Arrow (IPC stream by default, IPC
// file or Parquet on request) from a consistent snapshot:
//
//	GET /v1/export?table=steps|episodes|nodes|edges&format=arrow-stream|arrow|parquet
//	    &agent=A&episode=ID...&since=T&until=T&min_salience=X&role=R...&batch_rows=N
//	    &tenant=T&project=P
//
// Errors before the first byte are JSON with a status; an error after
// it aborts the connection, so a client never takes a cut stream for a
// whole one.
func (d *Daemon) httpExport(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	o, err := arrowexport.ParseQuery(q)
	if err != nil {
		writeError(w, fmt.Errorf("%w: %v", errBadRequest, err))
		return
	}
	f := arrowexport.Format(q.Get("format"))
	if f == "" {
		f = arrowexport.FormatArrowStream
	}
	o.Filter.Namespace = namespaceOf(r)
	o.Filter.Principal = principalOf(r)
	o.Filter.Principal.Export = true // non-portable items never leave
	ew, err := arrowexport.NewWriter(f, w)
	if err != nil {
		writeError(w, fmt.Errorf("%w: %v", errBadRequest, err))
		return
	}
	ctx, stop := d.exportContext(r.Context())
	defer stop()
	started := false
	o.OnSchema = func(_ *arrow.Schema, estimate int64) error {
		h := w.Header()
		h.Set("Content-Type", f.ContentType())
		h.Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", string(o.Table)+f.Ext()))
		h.Set(HeaderExportEstimate, strconv.FormatInt(estimate, 10))
		h.Set("Trailer", HeaderExportRows)
		w.WriteHeader(http.StatusOK)
		started = true
		return nil
	}
	t0 := time.Now()
	st, err := arrowexport.Run(ctx, d.store, o, ew)
	if err == nil {
		err = ew.Close()
	}
	if err != nil {
		if !started {
			if errors.Is(err, arrowexport.ErrInvalid) {
				err = fmt.Errorf("%w: %v", errBadRequest, err)
			}
			writeError(w, err)
			return
		}
		d.log.Warn("export aborted", "table", o.Table, "format", f, "rows", st.Rows, "err", err)
		panic(http.ErrAbortHandler) // the client sees a broken body, not a short file
	}
	w.Header().Set(HeaderExportRows, strconv.FormatInt(st.Rows, 10))
	d.log.Info("export", "table", o.Table, "format", f, "rows", st.Rows, "batches", st.Batches,
		"roles", o.Filter.Principal.Roles, "took", time.Since(t0))
}

// exportContext is ctx, also cancelled when the daemon begins to shut
// down, so that a long export ends before the store it reads closes.
func (d *Daemon) exportContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if !d.ready.Load() {
					cancel()
					return
				}
			}
		}
	}()
	return ctx, func() { close(done); cancel() }
}
