package daemon

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"golang.org/x/crypto/bcrypt"

	"github.com/ctxgraph/ctxgraph/particle"
)

// NATS accounts: the daemon, its streams and responders live in
// natsDaemonAccount; every configured user has an account of its own
// that imports exactly the subjects its roles may use. So no user sees
// another's traffic (not even replies on _INBOX), and the server stamps
// each request that crosses into the daemon's account with the
// sender's account (Nats-Request-Info): the responders know who asks.
const (
	natsDaemonAccount = "CTXGRAPH"
	natsInternalUser  = "ctxgraph-daemon"
	natsUserAccountPx = "U_"
)

// prepareNATSUsers indexes the users by account and reads their
// passwords from the environment.
func (s *security) prepareNATSUsers() error {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	s.internalPass = base64.RawURLEncoding.EncodeToString(b[:])
	for i := range s.cfg.Auth.NATSUsers {
		u := s.cfg.Auth.NATSUsers[i]
		if u.PasswordEnv != "" {
			u.Password = os.Getenv(u.PasswordEnv)
			if u.Password == "" {
				return fmt.Errorf("auth.nats_users %q: environment variable %s is empty", u.User, u.PasswordEnv)
			}
		}
		s.users[natsUserAccountPx+u.User] = &u
	}
	return nil
}

// grants are the subjects a user's roles may publish (as services of
// the daemon's account) and subscribe to (besides its own inbox).
type grants struct {
	pub, sub []string
}

func (s *security) grantsOf(u *NATSUser) grants {
	p := s.d.cfg.Prefix()
	var g grants
	add := func(list *[]string, subs ...string) {
		for _, x := range subs {
			if !slices.Contains(*list, x) {
				*list = append(*list, x)
			}
		}
	}
	planner := []string{p + ".planner.context", p + ".session.*.create", p + ".session.*.get", p + ".session.*.update", p + ".policy.edit"}
	for _, r := range u.Roles {
		switch r {
		case RoleController:
			add(&g.pub, p+".rlds."+u.Agent+".>")
		case RoleCMSWriter:
			add(&g.pub, p+".cms.>")
		case RoleOperator:
			add(&g.pub, p+".rlds.>", p+".cms.>", "$JS.API.>")
			add(&g.pub, planner...)
			add(&g.sub, p+".session.*.context")
		default:
			add(&g.pub, planner...)
			add(&g.sub, p+".session.*.context")
		}
	}
	return g
}

// accountsConfig is the server configuration of the accounts, their
// exports and imports.
func (s *security) accountsConfig() string {
	p := s.d.cfg.Prefix()
	var b strings.Builder
	b.WriteString("accounts {\n  " + natsDaemonAccount + " {\n    jetstream: enabled\n    exports: [\n")
	for _, svc := range []string{p + ".rlds.>", p + ".cms.>", p + ".planner.context", p + ".session.*.create",
		p + ".session.*.get", p + ".session.*.update", p + ".policy.edit", "$JS.API.>"} {
		fmt.Fprintf(&b, "      {service: %q}\n", svc)
	}
	fmt.Fprintf(&b, "      {stream: %q}\n    ]\n  }\n", p+".session.*.context")
	for _, u := range s.cfg.Auth.NATSUsers {
		g := s.grantsOf(&u)
		fmt.Fprintf(&b, "  %s%s {\n    imports: [\n", natsUserAccountPx, u.User)
		for _, svc := range g.pub {
			fmt.Fprintf(&b, "      {service: {account: %s, subject: %q}}\n", natsDaemonAccount, svc)
		}
		for _, st := range g.sub {
			fmt.Fprintf(&b, "      {stream: {account: %s, subject: %q}}\n", natsDaemonAccount, st)
		}
		b.WriteString("    ]\n  }\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// natsOptions adds accounts and authentication to the embedded
// server's options when auth is on.
func (s *security) natsOptions(opts *server.Options) error {
	if !s.enabled {
		return nil
	}
	var acc server.Options
	if err := acc.ProcessConfigString(s.accountsConfig()); err != nil {
		return fmt.Errorf("nats accounts: %w", err)
	}
	opts.Accounts = acc.Accounts
	opts.CustomClientAuthentication = natsAuth{s}
	opts.AlwaysEnableNonce = true // for nkey users
	return nil
}

// internalNATS is the daemon's own connection option.
func (s *security) internalNATS() nats.Option {
	if !s.enabled {
		return func(*nats.Options) error { return nil }
	}
	return nats.UserInfo(natsInternalUser, s.internalPass)
}

// natsAuth authenticates NATS connections against the configured users
// and gives each its account and permissions. A refusal is recorded.
type natsAuth struct{ s *security }

func (a natsAuth) Check(c server.ClientAuthentication) bool {
	s := a.s
	o := c.GetOpts()
	ns := s.d.ns
	if ns == nil {
		return false
	}
	if o.Username == natsInternalUser && o.Nkey == "" {
		ok := subtle.ConstantTimeCompare([]byte(o.Password), []byte(s.internalPass)) == 1
		if ok {
			acc, err := ns.LookupAccount(natsDaemonAccount)
			if err != nil {
				return false
			}
			c.RegisterUser(&server.User{Username: natsInternalUser, Account: acc})
			return true
		}
	}
	u, why := a.match(c, o)
	if u == nil {
		who := o.Username
		if o.Nkey != "" {
			who = o.Nkey
		}
		addr := ""
		if ra := c.RemoteAddress(); ra != nil {
			addr = ra.String()
		}
		s.deny(context.Background(), caller{ID: "nats:" + who, Principal: particle.Principal{Subject: who}},
			particle.Denial{Action: "nats.connect", Item: addr, Status: http.StatusUnauthorized, Reason: why})
		return false
	}
	acc, err := ns.LookupAccount(natsUserAccountPx + u.User)
	if err != nil {
		return false
	}
	g := s.grantsOf(u)
	c.RegisterUser(&server.User{Username: u.User, Account: acc, Permissions: &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: g.pub},
		Subscribe: &server.SubjectPermission{Allow: append([]string{"_INBOX.>"}, g.sub...)},
	}})
	return true
}

// match finds the configured user the client's credentials prove.
func (a natsAuth) match(c server.ClientAuthentication, o *server.ClientOpts) (*NATSUser, string) {
	if o.Nkey != "" {
		for _, u := range a.s.users {
			if u.NKey != o.Nkey {
				continue
			}
			sig, err := base64.RawURLEncoding.DecodeString(o.Sig)
			if err != nil {
				if sig, err = base64.StdEncoding.DecodeString(o.Sig); err != nil {
					return nil, "malformed nkey signature"
				}
			}
			pub, err := nkeys.FromPublicKey(u.NKey)
			if err != nil || pub.Verify(c.GetNonce(), sig) != nil {
				return nil, "bad nkey signature"
			}
			return u, ""
		}
		return nil, "unknown nkey"
	}
	if o.Username == "" {
		return nil, "no credentials"
	}
	u := a.s.users[natsUserAccountPx+o.Username]
	if u == nil || u.NKey != "" {
		return nil, "unknown user"
	}
	if strings.HasPrefix(u.Password, "$2") {
		if bcrypt.CompareHashAndPassword([]byte(u.Password), []byte(o.Password)) != nil {
			return nil, "bad password"
		}
		return u, ""
	}
	if subtle.ConstantTimeCompare([]byte(u.Password), []byte(o.Password)) != 1 {
		return nil, "bad password"
	}
	return u, ""
}

// violation matches the server's log line for a permission violation:
// `... - "U_<user>/<user>" - Publish Violation - Subject "<subject>"`.
var violation = regexp.MustCompile(`"` + natsUserAccountPx + `([A-Za-z0-9_-]+)/[^"]*" - (Publish|Subscription) Violation - (?:Subject|Reply) "([^"]*)"`)

// natsLogger records the server's permission violations as 403
// denials, then logs as usual.
type violationLogger struct {
	natsLogger
	s *security
}

func (l violationLogger) Errorf(f string, a ...any) {
	l.natsLogger.Errorf(f, a...)
	m := violation.FindStringSubmatch(fmt.Sprintf(f, a...))
	if m == nil {
		return
	}
	u := l.s.users[natsUserAccountPx+m[1]]
	c := caller{ID: "nats:" + m[1], Principal: particle.Principal{Subject: m[1]}}
	if u != nil {
		c.Principal = u.principal()
	}
	action := "nats.publish"
	if m[2] == "Subscription" {
		action = "nats.subscribe"
	}
	l.s.deny(context.Background(), c, particle.Denial{Action: action, Item: m[3], Status: http.StatusForbidden, Reason: "permissions violation"})
}

// natsLog wraps the server's logger when auth is on.
func (s *security) natsLog(l natsLogger) server.Logger {
	if !s.enabled {
		return l
	}
	return violationLogger{l, s}
}
