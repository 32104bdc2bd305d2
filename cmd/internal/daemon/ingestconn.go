package daemon

import (
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/nats-io/nats.go"
)

// The ingest consumers pull and ack over a connection of their own to
// the embedded server, over loopback TCP, not in-process as the rest of
// the daemon talks to it. An in-process connection is a net.Pipe: each
// write waits until the other side has read it all, so the server's
// delivery to the consumer and the consumer's acks to the server wait
// on each other's goroutines being scheduled. While a collection or a
// compaction holds the cores, those hand-offs held steps the server had
// stored for 100-300 ms before the consumer saw them; a socket's buffers
// take the writes at once. Three interleaved ingest-only pairs at 4,500
// steps/s: visibility p99 96, 137, 127 ms over TCP against 327, 253, 277
// in-process, its stored-to-delivered p99 11-23 ms against 61-164, bulk
// ingest and CPU a step unchanged (BENCHMARKS.md, sixty-fifth round).
// The responders stay in-process, where handing a reply to NATS takes
// half as long (thirty-fifth round).

// ingestConnect connects the ingest consumers' connection: loopback TCP
// to the embedded server's client port, as the daemon's internal user.
// It reconnects without limit while the daemon runs; a consumer's pulls
// resume on reconnection.
func (d *Daemon) ingestConnect() (*nats.Conn, error) {
	addr, ok := d.ns.Addr().(*net.TCPAddr)
	if !ok {
		return nil, fmt.Errorf("nats: the server listens on %v, not TCP", d.ns.Addr())
	}
	u := url.URL{Scheme: "nats", Host: net.JoinHostPort(dialHost(addr.IP).String(), fmt.Sprint(addr.Port))}
	nc, err := nats.Connect(u.String(), nats.Name("ctxgraph-daemon-ingest"), d.sec.internalNATS(),
		nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				d.log.Warn("ingest's NATS connection lost; reconnecting", "err", err)
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) { d.log.Info("ingest's NATS connection restored") }))
	if err != nil {
		return nil, fmt.Errorf("nats connect (ingest, %s): %w", u.Host, err)
	}
	return nc, nil
}

// dialHost is the address to reach a server listening on ip: the
// loopback address of its family when it listens on every address,
// else ip itself (a packet to a local address never leaves the host).
func dialHost(ip net.IP) net.IP {
	switch {
	case !ip.IsUnspecified():
		return ip
	case ip.To4() != nil:
		return net.IPv4(127, 0, 0, 1)
	default:
		return net.IPv6loopback
	}
}

// drain drains nc, waiting up to 10 s for it to close.
func (d *Daemon) drain(nc *nats.Conn) {
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := nc.Drain(); err != nil {
		nc.Close()
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		d.log.Error("nats drain timed out", "connection", nc.Opts.Name)
	}
}
