// Package tokens holds the API tokens in PostgreSQL: each belongs to a
// dashboard account, acts with a scope no wider than that account's current
// role, and is kept only as the hash of its secret. Creating and revoking
// one take the caller's transaction, so its audit entry commits with it.
package tokens

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/store"
	"github.com/hookd/hookd/internal/store/accounts"
)

// Scope is what a token may do, named after the dashboard's roles: read
// (a viewer's), operate (an operator's), admin (an admin's).
type Scope string

const (
	// ScopeRead reads everything and changes nothing.
	ScopeRead Scope = "read"
	// ScopeOperate also acts on events and delivery.
	ScopeOperate Scope = "operate"
	// ScopeAdmin also manages accounts, tokens and pruning.
	ScopeAdmin Scope = "admin"
)

// ParseScope returns the scope named s, or an error listing the scopes.
func ParseScope(s string) (Scope, error) {
	switch sc := Scope(s); sc {
	case ScopeRead, ScopeOperate, ScopeAdmin:
		return sc, nil
	}
	return "", fmt.Errorf("unknown scope %q: want read, operate or admin", s)
}

// Allows reports whether a token of scope s may act as need: admin
// includes operate, which includes read.
func (s Scope) Allows(need Scope) bool { return s.Role().Allows(need.Role()) }

// Role returns the dashboard role whose rights the scope has; "" for an
// unknown scope.
func (s Scope) Role() accounts.Role {
	switch s {
	case ScopeRead:
		return accounts.RoleViewer
	case ScopeOperate:
		return accounts.RoleOperator
	case ScopeAdmin:
		return accounts.RoleAdmin
	}
	return ""
}

// Token is an API token as stored: never its secret, which only Create
// returns, once.
type Token struct {
	ID    int64  `db:"id" json:"id"`
	Name  string `db:"name" json:"name"`
	Scope Scope  `db:"scope" json:"scope"`
	// AccountID is the account the token acts for; AccountEmail its email
	// now, or, once the account is removed, the email it had when the
	// token was made.
	AccountID    int64     `db:"account_id" json:"account_id"`
	AccountEmail string    `db:"account_email" json:"account_email"`
	CreatedAt    time.Time `db:"created_at" json:"created_at"`
	// ExpiresAt is nil for a token that never expires.
	ExpiresAt *time.Time `db:"expires_at" json:"expires_at"`
	// LastUsedAt is nil until its first use, then written at most once a
	// minute.
	LastUsedAt *time.Time `db:"last_used_at" json:"last_used_at"`
	RevokedAt  *time.Time `db:"revoked_at" json:"revoked_at"`
}

// AuditTarget is how an audit entry of an action on the token names it:
// its id and name, whose it is, and its scope.
func (t Token) AuditTarget() string {
	return fmt.Sprintf("token %d (%s) of %s, scope %s", t.ID, t.Name, t.AccountEmail, t.Scope)
}

// Errors of the package. ErrRefused is wrapped with the reason a token
// was refused: unknown, revoked, expired, account removed, or the
// account's role below the token's scope; all mean the same to a client
// (no valid token), and the reason is for the person reading it.
var (
	ErrRefused = errors.New("token refused")
	// ErrNotCreated is wrapped with the reason Create refused: a blank or
	// long name or one of several lines, an unknown scope, a scope above the account's role, no
	// such account, a negative lifetime.
	ErrNotCreated = errors.New("token not created")
	// ErrNotFound is returned by Get and Revoke for an unknown id.
	ErrNotFound = errors.New("no such token")
	// ErrAlreadyRevoked is returned by Revoke for a token revoked before.
	ErrAlreadyRevoked = errors.New("token already revoked")
)

// Prefix starts every secret, so that secret scanners can match one:
// Prefix followed by SecretLength base62 characters.
const Prefix = "hkd_"

// SecretLength is the number of base62 characters after Prefix: 32 random
// bytes (256 bits) written in base62, padded to a fixed length.
const SecretLength = 43

// MaxNameLength is the longest name a token may have, in characters.
const MaxNameLength = 100

// Store runs the tokens' queries.
type Store struct {
	pool store.DBTX
}

// New returns a Store over pool (a pool, or what a store of the same
// database runs on: queue.Store.DB).
func New(pool store.DBTX) *Store {
	return &Store{pool: pool}
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newSecret returns Prefix and 32 bytes from crypto/rand in base62.
func newSecret() (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("make token secret: %w", err)
	}
	n := new(big.Int).SetBytes(raw[:])
	digits := []byte(strings.Repeat("0", SecretLength))
	radix, digit := big.NewInt(62), new(big.Int)
	for i := SecretLength - 1; n.Sign() > 0; i-- {
		n.DivMod(n, radix, digit)
		digits[i] = base62[digit.Int64()]
	}
	return Prefix + string(digits), nil
}

// hash is what is stored of a secret: its SHA-256. A slow, salted hash
// (argon2, as for passwords) protects secrets a person chose, which can
// be guessed; a token's secret is 256 random bits, which no guessing
// reaches, so a fast hash is as safe, costs each request microseconds
// instead of tens of milliseconds, and, unsalted, lets the token be found
// by an equality on a unique index. Comparing through that index leaks
// nothing useful by its timing: it could at most tell how much of a
// guessed hash matched, which says nothing about any secret.
func hash(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

const tokenColumns = `t.id, t.name, t.scope, t.account_id, coalesce(u.email, t.account_email) AS account_email,
	t.created_at, t.expires_at, t.last_used_at, t.revoked_at`

// Create makes a token for the account accountID, named name, with scope
// and a lifetime of ttl (0: it never expires), in tx, and returns its
// secret, which is never seen again, and the token. The account's row is
// locked for share until tx ends, so its role cannot change or the account
// go between the check of the scope and the commit.
//
// It returns an error wrapping ErrNotCreated for a blank name, one longer
// than MaxNameLength or holding a control character, an unknown scope, a scope above the account's
// role, a negative ttl, or no account accountID.
func (s *Store) Create(ctx context.Context, tx pgx.Tx, accountID int64, name string, scope Scope, ttl time.Duration) (string, Token, error) {
	name = strings.TrimSpace(name)
	if err := checkNew(name, scope, ttl); err != nil {
		return "", Token{}, err
	}
	type account struct {
		Email string        `db:"email"`
		Role  accounts.Role `db:"role"`
	}
	a, found, err := store.QueryOne[account](ctx, tx, `SELECT email, role FROM users WHERE id = $1 FOR SHARE`, accountID)
	if err != nil {
		return "", Token{}, fmt.Errorf("read token's account: %w", err)
	}
	if !found {
		return "", Token{}, fmt.Errorf("%w: no account %d", ErrNotCreated, accountID)
	}
	if !a.Role.Allows(scope.Role()) {
		return "", Token{}, fmt.Errorf("%w: the scope %s exceeds the role of %s (%s), whose tokens may have scope %s at most",
			ErrNotCreated, scope, a.Email, a.Role, scopeOf(a.Role))
	}
	secret, err := newSecret()
	if err != nil {
		return "", Token{}, err
	}
	t, _, err := store.QueryOne[Token](ctx, tx, `
		WITH t AS (
		    INSERT INTO api_tokens (account_id, account_email, name, scope, secret_hash, expires_at)
		    VALUES ($1, $2, $3, $4, $5, CASE WHEN $6::float8 > 0 THEN now() + make_interval(secs => $6) END)
		    RETURNING *)
		SELECT `+tokenColumns+` FROM t LEFT JOIN users u ON u.id = t.account_id`,
		accountID, a.Email, name, scope, hash(secret), ttl.Seconds())
	if err != nil {
		return "", Token{}, fmt.Errorf("create token: %w", err)
	}
	return secret, t, nil
}

func checkNew(name string, scope Scope, ttl time.Duration) error {
	if name == "" {
		return fmt.Errorf("%w: a token needs a name, saying where it is used", ErrNotCreated)
	}
	if n := len([]rune(name)); n > MaxNameLength {
		return fmt.Errorf("%w: the name is %d characters long, more than %d", ErrNotCreated, n, MaxNameLength)
	}
	if strings.ContainsFunc(name, unicode.IsControl) {
		// A line break or a tab would break the lines of the audit log
		// and of `hookd tokens list` that name it.
		return fmt.Errorf("%w: the name holds a control character (a line break, a tab); give it one line of text", ErrNotCreated)
	}
	if _, err := ParseScope(string(scope)); err != nil {
		return fmt.Errorf("%w: %w", ErrNotCreated, err)
	}
	if ttl < 0 {
		return fmt.Errorf("%w: the lifetime %s is negative", ErrNotCreated, ttl)
	}
	return nil
}

// scopeOf returns the widest scope a role's tokens may have.
func scopeOf(r accounts.Role) Scope {
	for _, s := range []Scope{ScopeAdmin, ScopeOperate, ScopeRead} {
		if r.Allows(s.Role()) {
			return s
		}
	}
	return ""
}

// authenticated is a token as Authenticate reads it: with what decides
// whether it is let in, on the database's clock.
type authenticated struct {
	Token
	Revoked     bool          `db:"revoked"`
	Expired     bool          `db:"expired"`
	AccountGone bool          `db:"account_gone"`
	Role        accounts.Role `db:"role"`
}

// authenticate reads the token of a secret's hash and, when it is let in
// and its last use is a minute old or more, writes its last use: one
// statement. The UPDATE's condition is on the row it updates, so of many
// requests racing on a token whose last use is old, the first writes and
// the others, rechecking the row once the first commits (READ COMMITTED),
// find it recent and write nothing.
const authenticate = `
	WITH t AS (
	    SELECT ` + tokenColumns + `,
	           t.revoked_at IS NOT NULL AS revoked,
	           coalesce(t.expires_at <= now(), false) AS expired,
	           u.id IS NULL AS account_gone,
	           coalesce(u.role, '') AS role,
	           coalesce(array_position(ARRAY['viewer', 'operator', 'admin'], u.role)
	                    >= array_position(ARRAY['read', 'operate', 'admin'], t.scope), false) AS role_allows
	    FROM api_tokens t LEFT JOIN users u ON u.id = t.account_id
	    WHERE t.secret_hash = $1),
	used AS (
	    UPDATE api_tokens a SET last_used_at = now()
	    FROM t
	    WHERE a.id = t.id AND NOT t.revoked AND NOT t.expired AND t.role_allows
	      AND (a.last_used_at IS NULL OR a.last_used_at < now() - interval '1 minute')
	    RETURNING a.last_used_at)
	-- A use let in is the token's last use, now, whether this statement
	-- wrote it or a racing one did after this one's snapshot was taken
	-- (which then reads the older value, or none).
	SELECT id, name, scope, account_id, account_email, created_at, expires_at,
	       CASE WHEN NOT revoked AND NOT expired AND role_allows THEN now() ELSE last_used_at END AS last_used_at, revoked_at,
	       revoked, expired, account_gone, role
	FROM t`

// Authenticate returns the token whose secret this is, and records its use
// (at most once a minute), in one round trip. It returns an error wrapping
// ErrRefused, saying why, for a secret that is no token's, and for a token
// revoked, expired, of an account removed since, or of an account whose
// role is now below the token's scope.
func (s *Store) Authenticate(ctx context.Context, secret string) (Token, error) {
	if !strings.HasPrefix(secret, Prefix) {
		return Token{}, fmt.Errorf("%w: not a hookd token (they start with %s)", ErrRefused, Prefix)
	}
	a, found, err := store.QueryOne[authenticated](ctx, s.pool, authenticate, hash(secret))
	if err != nil {
		return Token{}, fmt.Errorf("authenticate token: %w", err)
	}
	switch {
	case !found:
		return Token{}, fmt.Errorf("%w: unknown token", ErrRefused)
	case a.Revoked:
		return Token{}, fmt.Errorf("%w: token %d (%s) was revoked at %s", ErrRefused, a.ID, a.Name, stamp(*a.RevokedAt))
	case a.Expired:
		return Token{}, fmt.Errorf("%w: token %d (%s) expired at %s", ErrRefused, a.ID, a.Name, stamp(*a.ExpiresAt))
	case a.AccountGone:
		return Token{}, fmt.Errorf("%w: token %d (%s) belongs to the account %s, which was removed",
			ErrRefused, a.ID, a.Name, a.AccountEmail)
	case !a.Role.Allows(a.Scope.Role()):
		return Token{}, fmt.Errorf("%w: token %d (%s) has scope %s, above its account %s's role, now %s",
			ErrRefused, a.ID, a.Name, a.Scope, a.AccountEmail, a.Role)
	}
	return a.Token, nil
}

// MaxLifetime is the longest lifetime ParseLifetime accepts: ten years.
// A token that should outlive it should never expire.
const MaxLifetime = 3650 * 24 * time.Hour

// ParseLifetime reads a token's lifetime as people write it: days ("90d"),
// a Go duration ("12h", "30m"), or "never" (and "") for a token that
// never expires, which is 0. It refuses a lifetime not above zero or above
// MaxLifetime.
func ParseLifetime(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "never" {
		return 0, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n > int(MaxLifetime/(24*time.Hour)) {
			return 0, fmt.Errorf("lifetime %q: want a whole number of days up to %d (90d), a duration (12h) or never",
				s, MaxLifetime/(24*time.Hour))
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("lifetime %q: want days (90d), a duration (12h) or never", s)
		}
	}
	if d <= 0 || d > MaxLifetime {
		return 0, fmt.Errorf("lifetime %q: want more than nothing and at most %dd; never for no expiry", s, MaxLifetime/(24*time.Hour))
	}
	return d, nil
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// List returns the tokens of the account accountID, or of every account
// for 0, revoked ones included, newest first within each account.
func (s *Store) List(ctx context.Context, accountID int64) ([]Token, error) {
	ts, err := store.QueryAll[Token](ctx, s.pool, `
		SELECT `+tokenColumns+` FROM api_tokens t LEFT JOIN users u ON u.id = t.account_id
		WHERE $1 = 0 OR t.account_id = $1
		ORDER BY lower(coalesce(u.email, t.account_email)), t.account_id, t.id DESC`, accountID)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return ts, nil
}

// Get returns the token id, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id int64) (Token, error) {
	t, found, err := store.QueryOne[Token](ctx, s.pool, `
		SELECT `+tokenColumns+` FROM api_tokens t LEFT JOIN users u ON u.id = t.account_id WHERE t.id = $1`, id)
	if err != nil {
		return Token{}, fmt.Errorf("read token: %w", err)
	}
	if !found {
		return Token{}, ErrNotFound
	}
	return t, nil
}

// Revoke revokes the token id in tx, from the commit on: every request
// with it is refused after, on every replica. It returns the token as
// revoked, ErrNotFound for an unknown id, and an error wrapping
// ErrAlreadyRevoked, which changes nothing, for a token revoked before.
func (s *Store) Revoke(ctx context.Context, tx pgx.Tx, id int64) (Token, error) {
	t, found, err := store.QueryOne[Token](ctx, tx, `
		WITH t AS (
		    UPDATE api_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL RETURNING *)
		SELECT `+tokenColumns+` FROM t LEFT JOIN users u ON u.id = t.account_id`, id)
	if err != nil {
		return Token{}, fmt.Errorf("revoke token: %w", err)
	}
	if found {
		return t, nil
	}
	before, found, err := store.QueryOne[Token](ctx, tx, `
		SELECT `+tokenColumns+` FROM api_tokens t LEFT JOIN users u ON u.id = t.account_id WHERE t.id = $1`, id)
	switch {
	case err != nil:
		return Token{}, fmt.Errorf("revoke token: %w", err)
	case !found:
		return Token{}, ErrNotFound
	}
	return Token{}, fmt.Errorf("%w: token %d (%s) at %s", ErrAlreadyRevoked, before.ID, before.Name, stamp(*before.RevokedAt))
}
