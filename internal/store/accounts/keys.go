package accounts

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SignInFormKey names the key the sign-in form's CSRF token is signed
// with: the form lives before any session, so its token is an HMAC of a
// cookie's nonce under this key, which every replica shares.
const SignInFormKey = "csrf"

// KnownBrowserKey names the key the cookies of browsers that signed in
// before are signed with. `hookd keys rotate` leaves it: a new key would
// forget every known browser at once.
const KnownBrowserKey = "known-device"

const (
	// DefaultKeyRefresh is how old a replica's copy of the keys may get
	// before it reads them again, so a rotation reaches every replica
	// within it.
	DefaultKeyRefresh = time.Minute
	// DefaultKeyGrace is how long a replaced key is still accepted: a
	// form loaded just before a rotation can still be sent.
	DefaultKeyGrace = time.Hour
	// keysKept is how many generations of a key a rotation keeps: the new
	// one, the one it replaces, and one more, so a form signed with a key
	// retired a while ago is told so rather than taken for a forgery.
	keysKept = 3
	// missRefresh spaces the re-reads a token matching no key causes: one
	// signed by a replica that read a rotation first is accepted at once,
	// and a flood of forged tokens costs a read a second at most.
	missRefresh = time.Second
)

// SigningKey is one generation of a named key.
type SigningKey struct {
	Generation int
	Key        []byte
	CreatedAt  time.Time
	// RetiredAt is when the next generation replaced it; nil for the
	// newest, which signs.
	RetiredAt *time.Time
}

// SigningKeys returns the keys named name, newest first, making the first
// on first use. Replicas racing to make it all get the one that was stored.
func (s *Store) SigningKeys(ctx context.Context, name string) ([]SigningKey, error) {
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("make signing key %s: %w", name, err)
	}
	// A replica that loses the race waits in ON CONFLICT for the winner
	// to commit; the SELECT after it, a statement of its own, sees it.
	if _, err := s.db.Exec(ctx, `
		INSERT INTO signing_keys (name, generation, key)
		SELECT $1, 1, $2 WHERE NOT EXISTS (SELECT 1 FROM signing_keys WHERE name = $1)
		ON CONFLICT DO NOTHING`, name, fresh); err != nil {
		return nil, fmt.Errorf("make signing key %s: %w", name, err)
	}
	rows, err := s.db.Query(ctx, `
		SELECT generation, key, created_at, lead(created_at) OVER (ORDER BY generation)
		FROM signing_keys WHERE name = $1
		ORDER BY generation DESC`, name)
	if err != nil {
		return nil, fmt.Errorf("read signing keys %s: %w", name, err)
	}
	keys, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (SigningKey, error) {
		var k SigningKey
		err := row.Scan(&k.Generation, &k.Key, &k.CreatedAt, &k.RetiredAt)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("read signing keys %s: %w", name, err)
	}
	return keys, nil
}

// ErrRotationRace is a rotation that met another of the same key at the
// same moment; the other one took effect.
var ErrRotationRace = errors.New("another rotation of the key ran at the same moment and took effect; this one changed nothing")

// RotateSigningKey makes a new generation of the key named name, which
// signs from the next read of the keys on, and deletes the generations
// before the newest keysKept. It returns the new key and the one it
// replaced (a zero SigningKey when there was none).
func (t *Tx) RotateSigningKey(ctx context.Context, name string) (made, replaced SigningKey, err error) {
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return SigningKey{}, SigningKey{}, fmt.Errorf("make signing key %s: %w", name, err)
	}
	made.Key = fresh
	err = t.db.QueryRow(ctx, `
		INSERT INTO signing_keys (name, generation, key)
		SELECT $1, coalesce(max(generation), 0) + 1, $2 FROM signing_keys WHERE name = $1
		RETURNING generation, created_at`, name, fresh).Scan(&made.Generation, &made.CreatedAt)
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "23505" {
		return SigningKey{}, SigningKey{}, ErrRotationRace
	}
	if err != nil {
		return SigningKey{}, SigningKey{}, fmt.Errorf("rotate signing key %s: %w", name, err)
	}
	err = t.db.QueryRow(ctx, `SELECT generation, key, created_at FROM signing_keys WHERE name = $1 AND generation = $2`,
		name, made.Generation-1).Scan(&replaced.Generation, &replaced.Key, &replaced.CreatedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return SigningKey{}, SigningKey{}, fmt.Errorf("rotate signing key %s: %w", name, err)
	default:
		replaced.RetiredAt = &made.CreatedAt
	}
	if _, err := t.db.Exec(ctx, `DELETE FROM signing_keys WHERE name = $1 AND generation <= $2`,
		name, made.Generation-keysKept); err != nil {
		return SigningKey{}, SigningKey{}, fmt.Errorf("rotate signing key %s: %w", name, err)
	}
	return made, replaced, nil
}

// KeyRingConfig says how a KeyRing keeps its copy.
type KeyRingConfig struct {
	// Refresh is how old the copy may get before a use reads the keys
	// again; DefaultKeyRefresh when zero.
	Refresh time.Duration
	// Grace is how long a replaced key is still accepted;
	// DefaultKeyGrace when zero.
	Grace time.Duration
	// Now is the clock a key's replacement is compared with; time.Now
	// when nil.
	Now func() time.Time
}

// KeyRing is one replica's copy of the keys of one name: the newest
// signs, and a token is checked against every key still accepted. Any use
// of it reads the keys again once its copy is Refresh old, so a rotation
// on any replica, or from `hookd keys rotate`, reaches it within that
// without a restart.
type KeyRing struct {
	store *Store
	name  string
	cfg   KeyRingConfig

	mu     sync.Mutex
	keys   []SigningKey
	readAt time.Time
}

// NewKeyRing returns the key ring of the keys named name.
func NewKeyRing(s *Store, name string, cfg KeyRingConfig) *KeyRing {
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultKeyRefresh
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultKeyGrace
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &KeyRing{store: s, name: name, cfg: cfg}
}

// read returns the copy of the keys, read again first when it is older
// than maxAge.
func (r *KeyRing) read(ctx context.Context, maxAge time.Duration) ([]SigningKey, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys == nil || r.cfg.Now().Sub(r.readAt) >= maxAge {
		keys, err := r.store.SigningKeys(ctx, r.name)
		if err != nil {
			return nil, err
		}
		r.keys, r.readAt = keys, r.cfg.Now()
	}
	return r.keys, nil
}

// Current returns the key that signs: the newest.
func (r *KeyRing) Current(ctx context.Context) (SigningKey, error) {
	keys, err := r.read(ctx, r.cfg.Refresh)
	if err != nil {
		return SigningKey{}, err
	}
	return keys[0], nil
}

// Verdict is what Verify found out about a token.
type Verdict int

const (
	// Unknown: no key made the token.
	Unknown Verdict = iota
	// Accepted: the newest key made it, or one replaced less than the
	// grace ago.
	Accepted
	// Retired: a key replaced longer than the grace ago made it.
	Retired
)

// Verify says which key, if any, made a token: made reports whether key
// made it. A token no key made has the keys read again (at most once a
// second) before it is called Unknown, so a token signed by a replica
// that saw a rotation first is accepted by one that has not yet.
func (r *KeyRing) Verify(ctx context.Context, made func(key []byte) bool) (Verdict, error) {
	for _, maxAge := range []time.Duration{r.cfg.Refresh, missRefresh} {
		keys, err := r.read(ctx, maxAge)
		if err != nil {
			return Unknown, err
		}
		for _, k := range keys {
			if !made(k.Key) {
				continue
			}
			if k.RetiredAt == nil || r.cfg.Now().Before(k.RetiredAt.Add(r.cfg.Grace)) {
				return Accepted, nil
			}
			return Retired, nil
		}
	}
	return Unknown, nil
}
