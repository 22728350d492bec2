package accounts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"golang.org/x/crypto/argon2"

	"github.com/hookd/hookd/internal/store"
)

// Role is what a dashboard account may do. Each role may do everything the
// ones before it may.
type Role string

const (
	// RoleViewer sees every page and acts on nothing.
	RoleViewer Role = "viewer"
	// RoleOperator also sends events back to the queue.
	RoleOperator Role = "operator"
	// RoleAdmin also prunes markers and manages accounts.
	RoleAdmin Role = "admin"
)

// ParseRole returns the role named s, or an error listing the roles.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleViewer, RoleOperator, RoleAdmin:
		return r, nil
	}
	return "", fmt.Errorf("unknown role %q: want viewer, operator or admin", s)
}

// Allows reports whether an account with role r may act as need.
func (r Role) Allows(need Role) bool { return r.rank() >= need.rank() }

func (r Role) rank() int {
	switch r {
	case RoleViewer:
		return 1
	case RoleOperator:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// User is a dashboard account: a password account, or one of the
// identity provider's (OIDCIssuer set), which has no password.
type User struct {
	ID           int64     `db:"id"`
	Email        string    `db:"email"`
	Role         Role      `db:"role"`
	PasswordHash string    `db:"password_hash"`
	CreatedAt    time.Time `db:"created_at"`
	// OIDCIssuer and OIDCSubject key an account of the identity provider;
	// both empty for a password account.
	OIDCIssuer  string `db:"oidc_issuer"`
	OIDCSubject string `db:"oidc_subject"`
	// LastSignInAt is nil until the account's first sign-in.
	LastSignInAt *time.Time `db:"last_sign_in_at"`
	// SessionGeneration moves on when an admin ends the account's sessions.
	SessionGeneration int64 `db:"session_generation"`
}

// FromProvider reports whether the account signs in through the identity
// provider.
func (u User) FromProvider() bool { return u.OIDCIssuer != "" }

// SessionStamp identifies the account's current password and session
// generation, and reveals nothing about the password. A session keeps it
// from sign-in and ends once it no longer matches: changing a password, or
// an admin ending the account's sessions, ends every session signed in
// before, on every replica, without finding them.
//
// Generation 0 stamps the password alone, as stamps did before sessions
// could be ended, so an upgrade signs nobody out.
func (u User) SessionStamp() string {
	stamped := u.PasswordHash
	if u.SessionGeneration != 0 {
		stamped += "\x00" + strconv.FormatInt(u.SessionGeneration, 10)
	}
	sum := sha256.Sum256([]byte(stamped))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// ErrBadCredentials is returned by Authenticate for an unknown email or a
// wrong password alike, so a caller cannot tell which and neither can the
// person signing in.
var ErrBadCredentials = errors.New("wrong email or password")

// MinPasswordLength is the shortest password CreateUser and SetPassword
// accept.
const MinPasswordLength = 8

// argon2id parameters: OWASP's password storage cheat sheet's first
// recommended configuration (19 MiB, 2 passes, 1 lane), about 30 ms a hash on
// one core; enough to make offline guessing expensive without making
// sign-in slow. The parameters travel in each hash, so raising them later
// leaves existing hashes verifiable.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

// HashPassword returns the argon2id hash of password in PHC string format.
func HashPassword(password string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, argonMemory, argonTime, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// checkPassword reports whether password matches the PHC hash.
func checkPassword(hash, password string) bool {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" || parts[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return false
	}
	var mem, time uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &mem, &time, &threads); err != nil {
		return false
	}
	b64 := base64.RawStdEncoding
	salt, err := b64.DecodeString(parts[4])
	if err != nil {
		return false
	}
	want, err := b64.DecodeString(parts[5])
	if err != nil {
		return false
	}
	got := argon2.IDKey([]byte(password), salt, time, mem, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}

// dummyHash is checked against when the email is unknown, so an unknown
// account takes as long to refuse as a wrong password. It is written out
// rather than hashed at start, where it would cost every hookd process 19 MiB
// it then keeps as its garbage collector's first goal, and so its peak
// resident set. TestDummyHashUsesTheCurrentParameters keeps it in step with
// the parameters above.
const dummyHash = "$argon2id$v=19$m=19456,t=2,p=1$azl8ekcNOzwsMODsrbhXmg$oIhAUOXOrViSFgYswzQfUKk7v04vacTSdoAKztmPI7Q"

func checkPasswordLength(password string) error {
	if len([]rune(password)) < MinPasswordLength {
		return refuse("the password must be at least %d characters", MinPasswordLength)
	}
	return nil
}

// checkEmail refuses what cannot be an address: no "@", nothing on one side
// of it, or blanks inside. Whether mail reaches it is not hookd's concern;
// the email is only the name people sign in with.
func checkEmail(email string) error {
	local, domain, ok := strings.Cut(email, "@")
	if !ok || local == "" || domain == "" || strings.Contains(domain, "@") ||
		strings.ContainsFunc(email, unicode.IsSpace) {
		return refuse("%q is not an email address", email)
	}
	return nil
}

const userColumns = `id, email, role, password_hash, created_at, coalesce(oidc_issuer, '') AS oidc_issuer,
	coalesce(oidc_subject, '') AS oidc_subject, last_sign_in_at, session_generation`

// isPasswordAccount is the condition on users of a password account: only
// those sign in with a password, and only their emails are unique.
const isPasswordAccount = `oidc_issuer IS NULL`

// CreateUser adds an account. A malformed email, a short password or an
// email already taken, in any case, is a *RefusedError.
func (s *Store) CreateUser(ctx context.Context, email, password string, role Role) (User, error) {
	email = strings.TrimSpace(email)
	if err := checkEmail(email); err != nil {
		return User{}, err
	}
	if _, err := ParseRole(string(role)); err != nil {
		return User{}, refuse("%v", err)
	}
	if err := checkPasswordLength(password); err != nil {
		return User{}, err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return User{}, err
	}
	u, found, err := store.QueryOne[User](ctx, s.db, `
		INSERT INTO users (email, password_hash, role) VALUES ($1, $2, $3)
		ON CONFLICT (lower(email)) WHERE `+isPasswordAccount+` DO NOTHING
		RETURNING `+userColumns, email, hash, role)
	if err != nil {
		return User{}, fmt.Errorf("create user: %w", err)
	}
	if !found {
		return User{}, refuse("an account for %s exists already", email)
	}
	return u, nil
}

// SetPassword replaces the password of the account with this email, or
// returns ErrNotFound.
func (s *Store) SetPassword(ctx context.Context, email, password string) error {
	if err := checkPasswordLength(password); err != nil {
		return err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return err
	}
	tag, err := s.db.Exec(ctx, `
		UPDATE users SET password_hash = $2, updated_at = now() WHERE lower(email) = lower($1) AND `+isPasswordAccount,
		strings.TrimSpace(email), hash)
	if err != nil {
		return fmt.Errorf("set password: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// EnsureAdmin creates an admin account with this email and password when
// no account has this email, and returns the account and whether it
// created it. An existing account is returned as it is: its password and
// role may since have been changed on purpose, and a bootstrap run at every
// start must not undo that. Replicas starting at once create it once.
func (s *Store) EnsureAdmin(ctx context.Context, email, password string) (User, bool, error) {
	u, err := s.UserByEmail(ctx, email)
	if err == nil {
		return u, false, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return User{}, false, err
	}
	u, err = s.CreateUser(ctx, email, password, RoleAdmin)
	if err != nil {
		// Another replica may have created it meanwhile.
		if existing, lookupErr := s.UserByEmail(ctx, email); lookupErr == nil {
			return existing, false, nil
		}
		return User{}, false, err
	}
	return u, true, nil
}

// UserByEmail returns the password account with this email, in any case,
// or ErrNotFound. The identity provider's accounts are never found by
// email: their email is whatever the provider said, and signs nobody in.
func (s *Store) UserByEmail(ctx context.Context, email string) (User, error) {
	return s.user(ctx, `lower(email) = lower($1) AND `+isPasswordAccount, strings.TrimSpace(email))
}

// User returns the account with this id, or ErrNotFound.
func (s *Store) User(ctx context.Context, id int64) (User, error) {
	return s.user(ctx, `id = $1`, id)
}

func (s *Store) user(ctx context.Context, where string, arg any) (User, error) {
	u, found, err := store.QueryOne[User](ctx, s.db, `SELECT `+userColumns+` FROM users WHERE `+where, arg)
	if err != nil {
		return User{}, fmt.Errorf("read user: %w", err)
	}
	if !found {
		return User{}, ErrNotFound
	}
	return u, nil
}

// Authenticate returns the account with this email when password is its
// password, and ErrBadCredentials otherwise. Every call is one password
// check, counted by PasswordChecks.
func (s *Store) Authenticate(ctx context.Context, email, password string) (User, error) {
	if s.checks != nil {
		s.checks.Add(1)
	}
	u, err := s.UserByEmail(ctx, email)
	if errors.Is(err, ErrNotFound) {
		checkPassword(dummyHash, password)
		return User{}, ErrBadCredentials
	}
	if err != nil {
		return User{}, err
	}
	if !checkPassword(u.PasswordHash, password) {
		return User{}, ErrBadCredentials
	}
	return u, nil
}

// PasswordChecks returns how many password checks Authenticate has made
// through this Store since it was made: what a sign-in throttle has let
// through, whatever the answers said.
func (s *Store) PasswordChecks() int64 {
	if s.checks == nil {
		return 0
	}
	return s.checks.Load()
}
