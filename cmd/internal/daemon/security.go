package daemon

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
)

// SecurityConfig is identity, rate limits and policy tightening: the
// auth, rate_limit and policy sections of configs/ctxgraph.yaml.
type SecurityConfig struct {
	Auth struct {
		// Enabled turns authentication on: HTTP needs an API key
		// (Authorization: Bearer), NATS a configured user. Off by
		// default, for a daemon on loopback; a daemon listening beyond
		// loopback refuses to start without it.
		Enabled bool `yaml:"enabled"`
		// BootstrapKeyEnv names an environment variable whose value, if
		// set, is an API key with the operator role (subject
		// "bootstrap"): the way to create the first keys.
		BootstrapKeyEnv string `yaml:"bootstrap_key_env"`
		// NATSUsers are who may connect to the embedded NATS server,
		// each in its own account with the subject permissions of its
		// roles.
		NATSUsers []NATSUser `yaml:"nats_users"`
	} `yaml:"auth"`
	RateLimit RateLimitConfig `yaml:"rate_limit"`
	Policy    struct {
		// TightenAfter denials of one role about one node within
		// TightenWindow propose a pending rule denying that role the
		// node, for an operator to approve or reject. 0 turns it off.
		TightenAfter  int           `yaml:"tighten_after"`
		TightenWindow time.Duration `yaml:"tighten_window"`
	} `yaml:"policy"`
}

// NATSUser is one NATS identity. Exactly one of Password, PasswordEnv
// and NKey is set.
type NATSUser struct {
	User string `yaml:"user"`
	// Password is plain text or a bcrypt hash ("$2a$...").
	Password    string `yaml:"password"`
	PasswordEnv string `yaml:"password_env"`
	// NKey is the user's public nkey (U...): the client signs the
	// server's nonce with the seed.
	NKey string `yaml:"nkey"`
	// Roles: controller (publishes its Agent's episodes only),
	// cms_writer (publishes CMS spans), operator (everything, policy
	// edits), any other (planner requests, sessions).
	Roles []string `yaml:"roles"`
	// Agent is the robot a controller publishes for, and the agent
	// a planner's requests speak for.
	Agent string `yaml:"agent"`
	// Shared marks a user whose answers several people see: sensitive
	// items are left out.
	Shared bool `yaml:"shared"`
}

// RateLimitConfig limits requests per principal (HTTP and NATS
// request/reply), with a token bucket.
type RateLimitConfig struct {
	// RequestsPerSecond per principal; 0 means unlimited.
	RequestsPerSecond float64 `yaml:"requests_per_second"`
	// Burst is how many requests may come at once.
	Burst int `yaml:"burst"`
	// Roles override the limit for principals holding the role (the
	// most generous applies).
	Roles map[string]RoleLimit `yaml:"roles"`
}

// RoleLimit is the rate limit of one role; 0 requests per second is
// unlimited.
type RoleLimit struct {
	RequestsPerSecond float64 `yaml:"requests_per_second"`
	Burst             int     `yaml:"burst"`
}

// Roles with a meaning to the daemon.
const (
	RoleOperator   = particle.RoleOperator
	RoleController = "controller"
	RoleCMSWriter  = "cms_writer"
	RoleMetrics    = "metrics"
)

// DefaultSecurity is the security configuration without a file.
func DefaultSecurity() SecurityConfig {
	var c SecurityConfig
	c.Auth.BootstrapKeyEnv = "CTXGRAPH_BOOTSTRAP_KEY"
	c.Auth.NATSUsers = []NATSUser{}
	c.RateLimit.Burst = 20
	c.RateLimit.Roles = map[string]RoleLimit{}
	c.Policy.TightenAfter = 5
	c.Policy.TightenWindow = 10 * time.Minute
	return c
}

// token is what user names, agents and roles may be: they become parts
// of subjects and account names.
var token = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// validateSecurity reports every problem of c's security sections,
// including listening beyond loopback without auth.
func (c *Config) validateSecurity() []error {
	var errs []error
	s := &c.Security
	if !s.Auth.Enabled {
		for name, addr := range map[string]string{"nats.addr": c.NATS.Addr, "http.addr": c.HTTP.Addr} {
			if host, _, err := net.SplitHostPort(addr); err == nil && !loopback(host) {
				errs = append(errs, fmt.Errorf("%s %q is not a loopback address: set auth.enabled (with keys and nats_users) to listen beyond this host", name, addr))
			}
		}
	}
	seen := map[string]bool{}
	for i, u := range s.Auth.NATSUsers {
		where := fmt.Sprintf("auth.nats_users[%d] %q", i, u.User)
		if !token.MatchString(u.User) || u.User == natsInternalUser {
			errs = append(errs, fmt.Errorf("%s: user must be letters, digits, '-' or '_' (and not %q)", where, natsInternalUser))
		}
		if seen[u.User] {
			errs = append(errs, fmt.Errorf("%s: duplicate user", where))
		}
		seen[u.User] = true
		set := 0
		for _, v := range []string{u.Password, u.PasswordEnv, u.NKey} {
			if v != "" {
				set++
			}
		}
		if set != 1 {
			errs = append(errs, fmt.Errorf("%s: set exactly one of password, password_env, nkey", where))
		}
		if u.NKey != "" && !strings.HasPrefix(u.NKey, "U") {
			errs = append(errs, fmt.Errorf("%s: nkey must be a user public key (U...)", where))
		}
		if len(u.Roles) == 0 {
			errs = append(errs, fmt.Errorf("%s: at least one role", where))
		}
		for _, r := range u.Roles {
			if !token.MatchString(r) {
				errs = append(errs, fmt.Errorf("%s: role %q", where, r))
			}
		}
		if u.Agent != "" && !token.MatchString(u.Agent) {
			errs = append(errs, fmt.Errorf("%s: agent %q", where, u.Agent))
		}
		if slices.Contains(u.Roles, RoleController) && u.Agent == "" {
			errs = append(errs, fmt.Errorf("%s: a controller needs its agent", where))
		}
	}
	if r := s.RateLimit; r.RequestsPerSecond < 0 || math.IsNaN(r.RequestsPerSecond) || (r.RequestsPerSecond > 0 && r.Burst < 1) {
		errs = append(errs, fmt.Errorf("rate_limit: requests_per_second %v must be ≥ 0 and burst %d ≥ 1", r.RequestsPerSecond, r.Burst))
	}
	for role, l := range s.RateLimit.Roles {
		if l.RequestsPerSecond < 0 || (l.RequestsPerSecond > 0 && l.Burst < 1) {
			errs = append(errs, fmt.Errorf("rate_limit.roles.%s: requests_per_second %v must be ≥ 0 and burst %d ≥ 1", role, l.RequestsPerSecond, l.Burst))
		}
	}
	if p := s.Policy; p.TightenAfter < 0 || (p.TightenAfter > 0 && p.TightenWindow <= 0) {
		errs = append(errs, fmt.Errorf("policy: tighten_after %d must be ≥ 0 and tighten_window %v > 0", p.TightenAfter, p.TightenWindow))
	}
	return errs
}

// loopback reports whether host names only this machine.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Errors of authentication, authorisation and rate limiting.
var (
	errUnauthorized = errors.New("unauthorized")
	errForbidden    = errors.New("forbidden")
	errRateLimited  = errors.New("rate limited")
)

// rateLimitedError carries how long to wait.
type rateLimitedError struct{ retry time.Duration }

func (e *rateLimitedError) Error() string {
	return fmt.Sprintf("rate limited: retry after %s", e.retry.Round(time.Millisecond))
}
func (e *rateLimitedError) Unwrap() error { return errRateLimited }

// retryAfter is the Retry-After value (whole seconds, at least 1).
func retryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}

// caller is who made a request, once authenticated.
type caller struct {
	particle.Principal
	// ID identifies the caller for rate limits and records: an API
	// key id, "nats:<user>", "bootstrap", or for anonymous callers
	// (auth off) their address.
	ID string
	// Authenticated is false when auth is off.
	Authenticated bool
}

// who names the caller in audit records.
func (c caller) who() string {
	if c.Subject != "" {
		return c.Subject
	}
	return c.ID
}

type callerKey struct{}

// callerOf is the caller the HTTP middleware put on r.
func callerOf(r *http.Request) caller {
	if c, ok := r.Context().Value(callerKey{}).(caller); ok {
		return c
	}
	return caller{ID: "anonymous"}
}

func withCaller(ctx context.Context, c caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// principalOf is who asks, as the policy sees it: the authenticated
// caller when auth is on; otherwise the roles and agent the request
// names (?role= repeatable, ?agent=), for a daemon on loopback.
func principalOf(r *http.Request) particle.Principal {
	c := callerOf(r)
	if c.Authenticated {
		return c.Principal
	}
	q := r.URL.Query()
	return particle.Principal{Roles: q["role"], Agent: q.Get("agent"), Subject: q.Get("subject")}
}

// requestPrincipal is principalOf for handlers whose body names roles:
// the body's roles count only when auth is off.
func requestPrincipal(r *http.Request, bodyRoles []string) particle.Principal {
	p := principalOf(r)
	if !callerOf(r).Authenticated && len(bodyRoles) > 0 {
		p.Roles = bodyRoles
	}
	return p
}

// bootstrapKey is the operator key from the environment, if any.
func (c *SecurityConfig) bootstrapKey() string {
	if c.Auth.BootstrapKeyEnv == "" {
		return ""
	}
	return os.Getenv(c.Auth.BootstrapKeyEnv)
}
