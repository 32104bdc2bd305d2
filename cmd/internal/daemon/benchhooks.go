package daemon

import "github.com/ctxgraph/ctxgraph/wave"

// VectorIndex is the daemon's vector index: ctxgraph bench measures its
// searches against exact search over the same store.
func (d *Daemon) VectorIndex() wave.Index { return d.index }
