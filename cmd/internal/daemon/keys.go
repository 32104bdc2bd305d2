package daemon

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ctxgraph/ctxgraph/particle"
)

// RecordAPIKey is the record kind of API keys: key id -> APIKey (JSON).
// The secret is never stored: only its SHA-256.
const RecordAPIKey = "auth.key"

// APIKey is a stored API key: who it stands for, never the secret.
type APIKey struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	Roles   []string `json:"roles"`
	Agent   string   `json:"agent,omitempty"`
	Subject string   `json:"subject,omitempty"`
	Shared  bool     `json:"shared,omitempty"`
	// Hash is the hex SHA-256 of the whole key.
	Hash      string    `json:"hash,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	RevokedBy string    `json:"revoked_by,omitempty"`
}

// KeySpec is what a new key grants.
type KeySpec struct {
	Name    string   `json:"name"`
	Roles   []string `json:"roles"`
	Agent   string   `json:"agent,omitempty"`
	Subject string   `json:"subject,omitempty"`
	Shared  bool     `json:"shared,omitempty"`
	// TTL, if positive, makes the key expire; JSON takes "720h".
	TTL Duration `json:"ttl,omitempty"`
}

// Duration is a time.Duration that JSON writes as "1h30m".
type Duration time.Duration

// MarshalJSON writes d as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string (or nanoseconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("duration: want a string such as \"720h\"")
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// keyPrefix starts every API key: ctxg_<id>_<secret>.
const keyPrefix = "ctxg_"

// active reports whether k may authenticate at t.
func (k *APIKey) active(t time.Time) bool {
	return k.RevokedAt.IsZero() && (k.ExpiresAt.IsZero() || t.Before(k.ExpiresAt))
}

// principal is the principal k stands for.
func (k *APIKey) principal() particle.Principal {
	subj := k.Subject
	if subj == "" {
		subj = k.Name
	}
	return particle.Principal{Roles: slices.Clone(k.Roles), Agent: k.Agent, Subject: subj, Shared: k.Shared}
}

// CreateKey stores a new API key and returns it with its secret, which
// is shown once and never stored.
func CreateKey(ctx context.Context, s *particle.Store, spec KeySpec, who string) (string, *APIKey, error) {
	spec.Name = strings.TrimSpace(spec.Name)
	var errs []string
	if spec.Name == "" {
		errs = append(errs, "name is required")
	}
	if len(spec.Roles) == 0 {
		errs = append(errs, "at least one role")
	}
	for _, r := range spec.Roles {
		if !token.MatchString(r) {
			errs = append(errs, fmt.Sprintf("role %q", r))
		}
	}
	if spec.Agent != "" && !token.MatchString(spec.Agent) {
		errs = append(errs, fmt.Sprintf("agent %q", spec.Agent))
	}
	if spec.TTL < 0 {
		errs = append(errs, "ttl must be positive")
	}
	if len(errs) > 0 {
		return "", nil, fmt.Errorf("%w: key: %s", errBadRequest, strings.Join(errs, "; "))
	}
	var id [6]byte
	var secret [32]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", nil, err
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return "", nil, err
	}
	k := &APIKey{ID: hex.EncodeToString(id[:]), Name: spec.Name, Roles: slices.Clone(spec.Roles), Agent: spec.Agent,
		Subject: spec.Subject, Shared: spec.Shared, CreatedAt: time.Now().UTC(), CreatedBy: who}
	if spec.TTL > 0 {
		k.ExpiresAt = k.CreatedAt.Add(time.Duration(spec.TTL))
	}
	plain := keyPrefix + k.ID + "_" + base64.RawURLEncoding.EncodeToString(secret[:])
	k.Hash = hashKey(plain)
	if err := putKey(ctx, s, k); err != nil {
		return "", nil, err
	}
	return plain, k, nil
}

// RevokeKey revokes key id for good.
func RevokeKey(ctx context.Context, s *particle.Store, id, who string) (*APIKey, error) {
	k, err := loadKey(s, id)
	if err != nil {
		return nil, err
	}
	if !k.RevokedAt.IsZero() {
		return k, nil
	}
	k.RevokedAt, k.RevokedBy = time.Now().UTC(), who
	return k, putKey(ctx, s, k)
}

// ListKeys returns every stored key (without hashes), oldest first.
func ListKeys(s *particle.Store) ([]*APIKey, error) {
	var out []*APIKey
	err := s.Records(RecordAPIKey, func(_ string, raw []byte) error {
		var k APIKey
		if err := json.Unmarshal(raw, &k); err != nil {
			return fmt.Errorf("api key record: %w", err)
		}
		out = append(out, &k)
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, err
}

func loadKey(s *particle.Store, id string) (*APIKey, error) {
	raw, err := s.Record(RecordAPIKey, id)
	if err != nil {
		return nil, fmt.Errorf("api key %s: %w", id, err)
	}
	var k APIKey
	if err := json.Unmarshal(raw, &k); err != nil {
		return nil, fmt.Errorf("api key %s: %w", id, err)
	}
	return &k, nil
}

func putKey(ctx context.Context, s *particle.Store, k *APIKey) error {
	raw, err := json.Marshal(k)
	if err != nil {
		return err
	}
	_, err = s.Update(ctx, func(b *particle.Batch) error { return b.PutRecord(RecordAPIKey, k.ID, raw) })
	return err
}

func hashKey(plain string) string {
	sum := sha256.Sum256([]byte(plain))
	return hex.EncodeToString(sum[:])
}

// keyring is the daemon's view of the stored keys, kept in step with
// every create and revoke it makes (keys created offline on a stopped
// data dir are read at start).
type keyring struct {
	mu   sync.RWMutex
	keys map[string]*APIKey
}

func loadKeyring(s *particle.Store) (*keyring, error) {
	all, err := ListKeys(s)
	if err != nil {
		return nil, err
	}
	kr := &keyring{keys: map[string]*APIKey{}}
	for _, k := range all {
		kr.keys[k.ID] = k
	}
	return kr, nil
}

// known takes k (created or revoked) into the keyring and returns it as
// callers may see it: without its hash.
func (kr *keyring) known(k *APIKey) *APIKey {
	kr.mu.Lock()
	kr.keys[k.ID] = k
	kr.mu.Unlock()
	c := *k
	c.Hash = ""
	return &c
}

// verify returns the key that plain is, or why not.
func (kr *keyring) verify(plain string, now time.Time) (*APIKey, string) {
	rest, ok := strings.CutPrefix(plain, keyPrefix)
	id, _, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 {
		return nil, "malformed key"
	}
	kr.mu.RLock()
	k := kr.keys[id]
	kr.mu.RUnlock()
	if k == nil || subtle.ConstantTimeCompare([]byte(hashKey(plain)), []byte(k.Hash)) != 1 {
		return nil, "unknown key"
	}
	if !k.RevokedAt.IsZero() {
		return nil, "revoked key"
	}
	if !k.active(now) {
		return nil, "expired key"
	}
	return k, ""
}

// Key routes (operators only).
func init() {
	extraRoutes = append(extraRoutes, func(d *Daemon, mux *http.ServeMux) {
		mux.HandleFunc("POST /v1/keys", d.httpKeyCreate)
		mux.HandleFunc("GET /v1/keys", d.httpKeyList)
		mux.HandleFunc("DELETE /v1/keys/{id}", d.httpKeyRevoke)
	})
}

// KeyCreated is the answer to POST /v1/keys: the key's secret appears
// here once.
type KeyCreated struct {
	Key    string  `json:"key"`
	APIKey *APIKey `json:"api_key"`
}

func (d *Daemon) httpKeyCreate(w http.ResponseWriter, r *http.Request) {
	var spec KeySpec
	if err := readJSON(r, &spec); err != nil {
		writeError(w, err)
		return
	}
	plain, k, err := CreateKey(r.Context(), d.store, spec, callerOf(r).who())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, KeyCreated{Key: plain, APIKey: d.sec.keys.known(k)})
}

func (d *Daemon) httpKeyList(w http.ResponseWriter, r *http.Request) {
	all, err := ListKeys(d.store)
	if err != nil {
		writeError(w, err)
		return
	}
	for _, k := range all {
		k.Hash = ""
	}
	if all == nil {
		all = []*APIKey{}
	}
	writeJSON(w, http.StatusOK, all)
}

func (d *Daemon) httpKeyRevoke(w http.ResponseWriter, r *http.Request) {
	k, err := RevokeKey(r.Context(), d.store, r.PathValue("id"), callerOf(r).who())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d.sec.keys.known(k))
}
