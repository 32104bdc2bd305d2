package daemon

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxgraph/ctxgraph/particle"
)

// security is the daemon's identity, rate limiting and denial state.
type security struct {
	d       *Daemon
	cfg     SecurityConfig
	enabled bool
	keys    *keyring
	boot    string // the bootstrap key, if any
	limits  *limiter
	denials *denialLog
	// users are the NATS users by account name.
	users        map[string]*NATSUser
	internalPass string

	denialsTotal *prometheus.CounterVec
	limitedTotal prometheus.Counter
}

// newSecurity loads the keys and starts the denial log. Call close
// before the store closes.
func newSecurity(d *Daemon) (*security, error) {
	cfg := d.cfg.Security
	s := &security{d: d, cfg: cfg, enabled: cfg.Auth.Enabled, boot: cfg.bootstrapKey(),
		limits: newLimiter(cfg.RateLimit), users: map[string]*NATSUser{}}
	var err error
	if s.keys, err = loadKeyring(d.store); err != nil {
		return nil, fmt.Errorf("api keys: %w", err)
	}
	if s.enabled {
		if err := s.prepareNATSUsers(); err != nil {
			return nil, err
		}
	}
	s.denialsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ctxgraph_policy_denials_total", Help: "Denials recorded, by status (401 no credentials, 403 wrong role, 404 hidden by policy).",
	}, []string{"status"})
	s.limitedTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ctxgraph_rate_limited_total", Help: "Requests refused with 429 by the per-principal rate limit.",
	})
	d.metrics.reg.MustRegister(s.denialsTotal, s.limitedTotal,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ctxgraph_policy_version", Help: "Version of the compiled policy (grows with every edit)."},
			func() float64 { return float64(d.store.PolicyVersion()) }))
	s.denials = newDenialLog(d.store, d.log.With("component", "policy"), cfg.Policy.TightenAfter, cfg.Policy.TightenWindow,
		func(status int) { s.denialsTotal.WithLabelValues(strconv.Itoa(status)).Inc() })
	return s, nil
}

// close writes the last denials; the store must still be open.
func (s *security) close() {
	if s != nil && s.denials != nil {
		s.denials.close()
	}
}

// deny records a denial of c.
func (s *security) deny(ctx context.Context, c caller, den particle.Denial) {
	den.Subject, den.Roles, den.Agent = c.who(), c.Roles, c.Agent
	s.denials.record(ctx, den)
}

// routeClass says who may call a route.
type routeClass int

const (
	routePublic   routeClass = iota // liveness and readiness
	routeRead                       // any authenticated caller; policy filters what it gets
	routeOperator                   // operators only: policy, keys, administration
	routeMetrics                    // operators and the metrics role
)

// readPosts are the POST, PATCH routes that read (or keep a caller's own
// session): any authenticated caller may use them.
var readPosts = []string{"/v1/context", "/v1/search", "/v1/strategies", "/v1/diff", "/v1/export", "/v1/sessions"}

// operatorPaths are administration: operators only, whatever the method.
var operatorPaths = []string{"/v1/policies", "/v1/keys", "/v1/dlq", "/v1/forget", "/v1/forgotten", "/v1/backup", "/v1/retention", "/debug/pprof"}

func classify(r *http.Request) routeClass {
	p := r.URL.Path
	switch {
	case p == "/healthz" || p == "/readyz":
		return routePublic
	case p == "/metrics":
		return routeMetrics
	}
	for _, op := range operatorPaths {
		if p == op || strings.HasPrefix(p, op+"/") {
			return routeOperator
		}
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return routeRead
	}
	for _, rp := range readPosts {
		if p == rp || strings.HasPrefix(p, rp+"/") {
			return routeRead
		}
	}
	return routeOperator // any other change to the graph
}

// authenticateHTTP finds the caller of r: the key of its bearer token
// (auth on) or an anonymous caller named by its address (auth off).
func (s *security) authenticateHTTP(r *http.Request) (caller, string) {
	if !s.enabled {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		return caller{ID: "ip:" + host}, ""
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return caller{}, "no credentials"
	}
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" {
		return caller{}, "authorization is not a bearer token"
	}
	if s.boot != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.boot)) == 1 {
		return caller{Principal: particle.Principal{Roles: []string{RoleOperator}, Subject: "bootstrap"}, ID: "bootstrap", Authenticated: true}, ""
	}
	k, why := s.keys.verify(tok, time.Now())
	if k == nil {
		return caller{}, why
	}
	return caller{Principal: k.principal(), ID: "key:" + k.ID, Authenticated: true}, ""
}

// permits reports whether c may call a route of class rc.
func (c caller) permits(rc routeClass, enabled bool) bool {
	if !enabled {
		return true
	}
	switch rc {
	case routeOperator:
		return c.HasRole(RoleOperator)
	case routeMetrics:
		return c.HasRole(RoleOperator) || c.HasRole(RoleMetrics)
	}
	return true
}

// secureHTTP authenticates every request, checks its route's role,
// applies the caller's rate limit and records refusals.
func (d *Daemon) secureHTTP(next http.Handler) http.Handler {
	s := d.sec
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := classify(r)
		if rc == routePublic {
			next.ServeHTTP(w, r)
			return
		}
		item := r.Method + " " + r.URL.Path
		c, why := s.authenticateHTTP(r)
		if why != "" {
			host, _, _ := net.SplitHostPort(r.RemoteAddr)
			s.deny(r.Context(), caller{ID: "ip:" + host}, particle.Denial{Action: "http", Item: item, Status: http.StatusUnauthorized, Reason: why})
			w.Header().Set("WWW-Authenticate", `Bearer realm="ctxgraph"`)
			writeError(w, fmt.Errorf("%w: %s", errUnauthorized, why))
			return
		}
		if !c.permits(rc, s.enabled) {
			s.deny(r.Context(), c, particle.Denial{Action: "http", Item: item, Status: http.StatusForbidden, Reason: "route needs the operator role"})
			writeError(w, fmt.Errorf("%w: %s needs the operator role", errForbidden, item))
			return
		}
		if ok, wait := s.limits.allow(c.ID, c.Roles, time.Now()); !ok {
			s.limitedTotal.Inc()
			w.Header().Set("Retry-After", retryAfter(wait))
			writeError(w, &rateLimitedError{wait})
			return
		}
		next.ServeHTTP(w, r.WithContext(withCaller(r.Context(), c)))
	})
}

// requestInfo is the part of the Nats-Request-Info header the server
// adds to a request that crossed into the daemon's account.
type requestInfo struct {
	Account string `json:"acc"`
	User    string `json:"user"`
}

// natsCaller is who sent m. With auth off it is anonymous (the request
// body names its roles). With auth on, the server's Nats-Request-Info
// header names the sender's account (one per user; clients cannot forge
// it); a message without it comes from inside the daemon's account.
func (s *security) natsCaller(m *nats.Msg) (caller, error) {
	if !s.enabled {
		return caller{ID: "nats:anonymous"}, nil
	}
	raw := m.Header.Get("Nats-Request-Info")
	if raw == "" {
		return caller{Principal: particle.Principal{Roles: []string{RoleOperator}, Subject: natsInternalUser}, ID: "nats:" + natsInternalUser, Authenticated: true}, nil
	}
	var ri requestInfo
	if err := json.Unmarshal([]byte(raw), &ri); err != nil {
		return caller{}, fmt.Errorf("%w: request info: %v", errUnauthorized, err)
	}
	u := s.users[ri.Account]
	if u == nil {
		return caller{}, fmt.Errorf("%w: account %q", errUnauthorized, ri.Account)
	}
	return caller{Principal: u.principal(), ID: "nats:" + u.User, Authenticated: true}, nil
}

func (u *NATSUser) principal() particle.Principal {
	return particle.Principal{Roles: append([]string(nil), u.Roles...), Agent: u.Agent, Subject: u.User, Shared: u.Shared}
}

type natsCallerKey struct{}

// guardNATS wraps a responder: it identifies the sender, applies its
// rate limit and passes the caller on in the handler's context.
func (d *Daemon) guardNATS(fn func(ctx context.Context, m *nats.Msg)) nats.MsgHandler {
	s := d.sec
	return func(m *nats.Msg) {
		ctx := context.Background()
		c, err := s.natsCaller(m)
		if err != nil {
			s.deny(ctx, c, particle.Denial{Action: "nats", Item: m.Subject, Status: http.StatusUnauthorized, Reason: err.Error()})
			d.respond(m, nil, err)
			return
		}
		if ok, wait := s.limits.allow(c.ID, c.Roles, time.Now()); !ok {
			s.limitedTotal.Inc()
			d.respond(m, nil, &rateLimitedError{wait})
			return
		}
		fn(context.WithValue(ctx, natsCallerKey{}, c), m)
	}
}

// natsCallerOf is the caller guardNATS found.
func natsCallerOf(ctx context.Context) caller {
	if c, ok := ctx.Value(natsCallerKey{}).(caller); ok {
		return c
	}
	return caller{ID: "nats:anonymous"}
}

// errorStatus adds the statuses of this file to errorBody's.
func errorStatus(err error) (int, string, bool) {
	switch {
	case errors.Is(err, errUnauthorized):
		return http.StatusUnauthorized, "unauthorized", true
	case errors.Is(err, errForbidden):
		return http.StatusForbidden, "forbidden", true
	case errors.Is(err, errRateLimited):
		return http.StatusTooManyRequests, "rate_limited", true
	}
	return 0, "", false
}
