package tokens_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/internal/store/tokens"
	"github.com/hookd/hookd/queue/queuetest"
)

// testBundle is what a test of the tokens works with besides its Store.
type testBundle struct {
	// pool is on the test's own fresh, migrated database, for the rows a
	// test puts in place and the assertions it makes in SQL.
	pool     *pgxpool.Pool
	accounts *accounts.Store
	// admin is an admin account, the actor of account changes.
	admin accounts.User
}

// setup returns a Store on a fresh, migrated database of t's own, and the
// bundle of what else the test needs. Every test of the package starts
// with it.
func setup(t *testing.T) (*tokens.Store, *testBundle) {
	t.Helper()
	pool := queuetest.NewPool(t)
	b := &testBundle{pool: pool, accounts: accounts.New(pool)}
	b.admin = b.createAccount(t, "admin@example.com", accounts.RoleAdmin)
	return tokens.New(pool), b
}

func (b *testBundle) createAccount(t *testing.T, email string, role accounts.Role) accounts.User {
	t.Helper()
	u, err := b.accounts.CreateUser(context.Background(), email, "long enough", role)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// create makes a token in a transaction of its own.
func create(t *testing.T, s *tokens.Store, b *testBundle, accountID int64, name string, scope tokens.Scope, ttl time.Duration) (string, tokens.Token) {
	t.Helper()
	secret, tok, err := tryCreate(s, b, accountID, name, scope, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return secret, tok
}

func tryCreate(s *tokens.Store, b *testBundle, accountID int64, name string, scope tokens.Scope, ttl time.Duration) (secret string, tok tokens.Token, err error) {
	ctx := context.Background()
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		secret, tok, err = s.Create(ctx, tx, accountID, name, scope, ttl)
		return err
	})
	return secret, tok, err
}

func revoke(s *tokens.Store, b *testBundle, id int64) (tok tokens.Token, err error) {
	ctx := context.Background()
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		tok, err = s.Revoke(ctx, tx, id)
		return err
	})
	return tok, err
}

func TestScope_AllowsItsOwnAndNarrower(t *testing.T) {
	t.Parallel()
	all := []tokens.Scope{tokens.ScopeRead, tokens.ScopeOperate, tokens.ScopeAdmin}
	for i, has := range all {
		for j, need := range all {
			if got, want := has.Allows(need), i >= j; got != want {
				t.Errorf("%s.Allows(%s) = %v, want %v", has, need, got, want)
			}
		}
		if got, err := tokens.ParseScope(string(has)); err != nil || got != has {
			t.Errorf("ParseScope(%q) = %q, %v", has, got, err)
		}
	}
	if _, err := tokens.ParseScope("write"); err == nil || err.Error() != `unknown scope "write": want read, operate or admin` {
		t.Errorf("ParseScope(write): %v", err)
	}
}

var secretShape = regexp.MustCompile(`^hkd_[0-9A-Za-z]{43}$`)

func TestCreate_StoresOnlyTheHashOfARandomSecret(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	seen := map[string]bool{}
	for i := range 20 {
		secret, tok := create(t, s, b, b.admin.ID, fmt.Sprintf("ci %d", i), tokens.ScopeAdmin, 0)
		if !secretShape.MatchString(secret) {
			t.Fatalf("secret %q does not match %s", secret, secretShape)
		}
		if seen[secret] {
			t.Fatalf("secret %q made twice", secret)
		}
		seen[secret] = true
		var stored []byte
		var row string
		if err := b.pool.QueryRow(ctx, `SELECT secret_hash, t::text FROM api_tokens t WHERE id = $1`, tok.ID).Scan(&stored, &row); err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256([]byte(secret)); string(stored) != string(sum[:]) {
			t.Errorf("stored %x, want the SHA-256 of the secret %x", stored, sum)
		}
		if strings.Contains(row, secret[len(tokens.Prefix):]) {
			t.Errorf("the row %s holds the secret", row)
		}
	}
}

func TestCreate_ExpiresAfterItsLifetime(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	_, never := create(t, s, b, b.admin.ID, "never", tokens.ScopeRead, 0)
	if never.ExpiresAt != nil {
		t.Errorf("a token made with no lifetime expires at %v, want never", never.ExpiresAt)
	}
	_, quarter := create(t, s, b, b.admin.ID, "quarter", tokens.ScopeRead, 90*24*time.Hour)
	if quarter.ExpiresAt == nil || !quarter.ExpiresAt.Equal(quarter.CreatedAt.Add(90*24*time.Hour)) {
		t.Errorf("a 90-day token made at %v expires at %v", quarter.CreatedAt, quarter.ExpiresAt)
	}
	want := tokens.Token{ID: quarter.ID, Name: "quarter", Scope: tokens.ScopeRead, AccountID: b.admin.ID,
		AccountEmail: "admin@example.com", CreatedAt: quarter.CreatedAt, ExpiresAt: quarter.ExpiresAt}
	got, err := s.Get(context.Background(), quarter.ID)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Get = %+v, want %+v", got, want)
	}
}

func TestCreate_RefusesWithAReason(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	viewer := b.createAccount(t, "viewer@example.com", accounts.RoleViewer)
	operator := b.createAccount(t, "operator@example.com", accounts.RoleOperator)
	for _, tc := range []struct {
		name      string
		accountID int64
		tokenName string
		scope     tokens.Scope
		ttl       time.Duration
		want      string
	}{
		{"BlankName", b.admin.ID, "  ", tokens.ScopeRead, 0,
			"token not created: a token needs a name, saying where it is used"},
		{"LongName", b.admin.ID, strings.Repeat("é", 101), tokens.ScopeRead, 0,
			"token not created: the name is 101 characters long, more than 100"},
		{"LineBreakInName", b.admin.ID, "ci\nadmin", tokens.ScopeRead, 0,
			"token not created: the name holds a control character (a line break, a tab); give it one line of text"},
		{"UnknownScope", b.admin.ID, "ci", "write", 0,
			`token not created: unknown scope "write": want read, operate or admin`},
		{"NegativeLifetime", b.admin.ID, "ci", tokens.ScopeRead, -time.Hour,
			"token not created: the lifetime -1h0m0s is negative"},
		{"NoAccount", 999_999, "ci", tokens.ScopeRead, 0,
			"token not created: no account 999999"},
		{"OperateForAViewer", viewer.ID, "ci", tokens.ScopeOperate, 0,
			"token not created: the scope operate exceeds the role of viewer@example.com (viewer), whose tokens may have scope read at most"},
		{"AdminForAnOperator", operator.ID, "ci", tokens.ScopeAdmin, 0,
			"token not created: the scope admin exceeds the role of operator@example.com (operator), whose tokens may have scope operate at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := tryCreate(s, b, tc.accountID, tc.tokenName, tc.scope, tc.ttl)
			if !errors.Is(err, tokens.ErrNotCreated) || err.Error() != tc.want {
				t.Errorf("Create: %v, want %q", err, tc.want)
			}
		})
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM api_tokens`); n != 0 {
		t.Errorf("%d tokens after refusals only, want 0", n)
	}
	// A role's own scope, and those below it, are made.
	create(t, s, b, viewer.ID, "ci", tokens.ScopeRead, 0)
	create(t, s, b, operator.ID, "ci", tokens.ScopeOperate, 0)
	create(t, s, b, operator.ID, "ci", tokens.ScopeRead, 0)
}

func TestAuthenticate_RefusesEachReason(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	operator := b.createAccount(t, "operator@example.com", accounts.RoleOperator)
	leaver := b.createAccount(t, "leaver@example.com", accounts.RoleAdmin)

	revokedSecret, revoked := create(t, s, b, b.admin.ID, "revoked", tokens.ScopeRead, 0)
	if _, err := revoke(s, b, revoked.ID); err != nil {
		t.Fatal(err)
	}
	revoked, _ = s.Get(ctx, revoked.ID)

	expiredSecret, expired := create(t, s, b, b.admin.ID, "expired", tokens.ScopeRead, time.Hour)
	var expiredAt time.Time
	if err := b.pool.QueryRow(ctx, `
		UPDATE api_tokens SET created_at = now() - interval '2 hours', expires_at = now() - interval '1 second'
		WHERE id = $1 RETURNING expires_at`, expired.ID).Scan(&expiredAt); err != nil {
		t.Fatal(err)
	}

	leaverSecret, leaverTok := create(t, s, b, leaver.ID, "leaver's", tokens.ScopeRead, 0)
	if err := b.accounts.InTx(ctx, func(tx *accounts.Tx) error {
		_, err := tx.RemoveUser(ctx, b.admin.ID, leaver.ID)
		return err
	}); err != nil {
		t.Fatal(err)
	}

	demotedSecret, demoted := create(t, s, b, operator.ID, "deploy", tokens.ScopeOperate, 0)
	readSecret, _ := create(t, s, b, operator.ID, "runbook", tokens.ScopeRead, 0)
	if err := b.accounts.InTx(ctx, func(tx *accounts.Tx) error {
		_, err := tx.SetRole(ctx, b.admin.ID, operator.ID, accounts.RoleViewer)
		return err
	}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct{ name, secret, want string }{
		{"NotAToken", "ghp_0123456789", "token refused: not a hookd token (they start with hkd_)"},
		{"Unknown", "hkd_" + strings.Repeat("0", 43), "token refused: unknown token"},
		{"Revoked", revokedSecret, fmt.Sprintf("token refused: token %d (revoked) was revoked at %s",
			revoked.ID, revoked.RevokedAt.UTC().Format(time.RFC3339))},
		{"Expired", expiredSecret, fmt.Sprintf("token refused: token %d (expired) expired at %s",
			expired.ID, expiredAt.UTC().Format(time.RFC3339))},
		{"AccountRemoved", leaverSecret, fmt.Sprintf("token refused: token %d (leaver's) belongs to the account leaver@example.com, which was removed",
			leaverTok.ID)},
		{"RoleBelowScope", demotedSecret, fmt.Sprintf("token refused: token %d (deploy) has scope operate, above its account operator@example.com's role, now viewer",
			demoted.ID)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := s.Authenticate(ctx, tc.secret)
			if !errors.Is(err, tokens.ErrRefused) || err.Error() != tc.want {
				t.Errorf("Authenticate: %v, want %q", err, tc.want)
			}
			if tok != (tokens.Token{}) {
				t.Errorf("Authenticate refused and returned %+v", tok)
			}
		})
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM api_tokens WHERE last_used_at IS NOT NULL`); n != 0 {
		t.Errorf("%d refused tokens have a last use, want 0", n)
	}
	// The demoted viewer's read token stays good.
	tok, err := s.Authenticate(ctx, readSecret)
	if err != nil || tok.Name != "runbook" || tok.LastUsedAt == nil {
		t.Errorf("Authenticate(read token of a viewer) = %+v, %v", tok, err)
	}
}

// countLastUseWrites installs a trigger on the test's database that counts
// every write of a token's last use, and returns a func reading the count.
func countLastUseWrites(t *testing.T, pool *pgxpool.Pool) func() int64 {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `
		CREATE TABLE last_use_writes (n bigint NOT NULL);
		INSERT INTO last_use_writes VALUES (0);
		CREATE FUNCTION count_last_use() RETURNS trigger LANGUAGE plpgsql AS
		    $$ BEGIN UPDATE last_use_writes SET n = n + 1; RETURN NEW; END $$;
		CREATE TRIGGER count_last_use AFTER UPDATE OF last_used_at ON api_tokens
		    FOR EACH ROW EXECUTE FUNCTION count_last_use();`); err != nil {
		t.Fatal(err)
	}
	return func() int64 { return queuetest.Count(t, pool, `SELECT n FROM last_use_writes`) }
}

func TestAuthenticate_RacingUsesWriteTheLastUseOnceAMinute(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	secret, tok := create(t, s, b, b.admin.ID, "busy", tokens.ScopeAdmin, 0)
	writes := countLastUseWrites(t, b.pool)

	race := func() {
		t.Helper()
		const racers = 64
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, racers)
		for range racers {
			wg.Go(func() {
				<-start
				got, err := s.Authenticate(ctx, secret)
				if err == nil && (got.ID != tok.ID || got.LastUsedAt == nil) {
					err = fmt.Errorf("authenticated as %+v", got)
				}
				errs <- err
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}

	race()
	if n := writes(); n != 1 {
		t.Fatalf("%d writes of the last use by 64 racing uses of a new token, want 1", n)
	}
	race()
	if n := writes(); n != 1 {
		t.Fatalf("%d writes of the last use after a second race within the minute, want still 1", n)
	}
	if _, err := b.pool.Exec(ctx, `UPDATE api_tokens SET last_used_at = now() - interval '61 seconds' WHERE id = $1`, tok.ID); err != nil {
		t.Fatal(err)
	}
	base := writes() // the test's own write above
	race()
	if n := writes() - base; n != 1 {
		t.Fatalf("%d writes of a last use more than a minute old by 64 racing uses, want 1", n)
	}
	got, err := s.Get(ctx, tok.ID)
	if err != nil {
		t.Fatal(err)
	}
	var fresh bool
	if err := b.pool.QueryRow(ctx, `SELECT $1 > now() - interval '1 minute'`, got.LastUsedAt).Scan(&fresh); err != nil || !fresh {
		t.Errorf("last use %v after the race is not within the minute (%v)", got.LastUsedAt, err)
	}
}

func TestRevoke_OnceAndWithItsTransaction(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	secret, tok := create(t, s, b, b.admin.ID, "ci", tokens.ScopeRead, 0)

	boom := errors.New("boom")
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := s.Revoke(ctx, tx, tok.ID); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Revoke in a rolled-back transaction: %v", err)
	}
	if _, err := s.Authenticate(ctx, secret); err != nil {
		t.Fatalf("the revocation rolled back, yet: %v", err)
	}

	revoked, err := revoke(s, b, tok.ID)
	if err != nil || revoked.RevokedAt == nil || revoked.ID != tok.ID {
		t.Fatalf("Revoke = %+v, %v", revoked, err)
	}
	_, err = revoke(s, b, tok.ID)
	want := fmt.Sprintf("token already revoked: token %d (ci) at %s", tok.ID, revoked.RevokedAt.UTC().Format(time.RFC3339))
	if !errors.Is(err, tokens.ErrAlreadyRevoked) || err.Error() != want {
		t.Errorf("Revoke again: %v, want %q", err, want)
	}
	if again, _ := s.Get(ctx, tok.ID); !again.RevokedAt.Equal(*revoked.RevokedAt) {
		t.Errorf("revoked at %v, then at %v after a second Revoke", revoked.RevokedAt, again.RevokedAt)
	}
	if _, err := revoke(s, b, 999_999); !errors.Is(err, tokens.ErrNotFound) {
		t.Errorf("Revoke(unknown): %v, want ErrNotFound", err)
	}
	if _, err := s.Get(ctx, 999_999); !errors.Is(err, tokens.ErrNotFound) {
		t.Errorf("Get(unknown): %v, want ErrNotFound", err)
	}
}

func TestList_ByAccountAndAll(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	ana := b.createAccount(t, "ana@example.com", accounts.RoleOperator)
	zoe := b.createAccount(t, "zoe@example.com", accounts.RoleViewer)
	_, a1 := create(t, s, b, ana.ID, "first", tokens.ScopeRead, 0)
	_, a2 := create(t, s, b, ana.ID, "second", tokens.ScopeOperate, time.Hour)
	_, z1 := create(t, s, b, zoe.ID, "zoe's", tokens.ScopeRead, 0)
	_, ad := create(t, s, b, b.admin.ID, "admin's", tokens.ScopeAdmin, 0)
	if _, err := revoke(s, b, a1.ID); err != nil {
		t.Fatal(err)
	}
	ids := func(ts []tokens.Token) []int64 {
		var out []int64
		for _, t := range ts {
			out = append(out, t.ID)
		}
		return out
	}
	for _, tc := range []struct {
		account int64
		want    []int64
	}{
		{ana.ID, []int64{a2.ID, a1.ID}},
		{zoe.ID, []int64{z1.ID}},
		{0, []int64{ad.ID, a2.ID, a1.ID, z1.ID}},
		{999_999, nil},
	} {
		got, err := s.List(ctx, tc.account)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(ids(got)) != fmt.Sprint(tc.want) {
			t.Errorf("List(%d) = %v, want %v", tc.account, ids(got), tc.want)
		}
	}
	all, _ := s.List(ctx, ana.ID)
	if all[1].RevokedAt == nil || all[0].RevokedAt != nil || all[0].Scope != tokens.ScopeOperate || all[0].ExpiresAt == nil {
		t.Errorf("List(ana) = %+v", all)
	}
}

// A token's creation and revocation commit with their audit entries, or
// neither does.
func TestCreateAndRevoke_AuditedInTheirTransaction(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	who := audit.Account{ID: b.admin.ID, Email: b.admin.Email}
	boom := errors.New("boom")
	count := func(sql string) int64 { return queuetest.Count(t, b.pool, sql) }

	var tok tokens.Token
	createAudited := func(then error) error {
		return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			var err error
			if _, tok, err = s.Create(ctx, tx, b.admin.ID, "ci", tokens.ScopeOperate, 0); err != nil {
				return err
			}
			if err := audit.RecordAccount(ctx, tx, who, audit.TokenCreate, tok.AuditTarget(), 1); err != nil {
				return err
			}
			return then
		})
	}
	if err := createAudited(boom); !errors.Is(err, boom) {
		t.Fatalf("create: %v", err)
	}
	if n, e := count(`SELECT count(*) FROM api_tokens`), count(`SELECT count(*) FROM audit_log`); n != 0 || e != 0 {
		t.Fatalf("after the rollback: %d tokens, %d entries; want none", n, e)
	}
	if err := createAudited(nil); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("token %d (ci) of admin@example.com, scope operate", tok.ID)
	if n := count(`SELECT count(*) FROM audit_log WHERE action = 'token_create' AND target = '` + want + `'`); n != 1 {
		t.Fatalf("%d token_create entries naming %q, want 1", n, want)
	}

	revokeAudited := func(then error) error {
		return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			revoked, err := s.Revoke(ctx, tx, tok.ID)
			if err != nil {
				return err
			}
			if err := audit.RecordAccount(ctx, tx, who, audit.TokenRevoke, revoked.AuditTarget(), 1); err != nil {
				return err
			}
			return then
		})
	}
	if err := revokeAudited(boom); !errors.Is(err, boom) {
		t.Fatalf("revoke: %v", err)
	}
	if n, e := count(`SELECT count(*) FROM api_tokens WHERE revoked_at IS NOT NULL`), count(`SELECT count(*) FROM audit_log WHERE action = 'token_revoke'`); n != 0 || e != 0 {
		t.Fatalf("after the rollback: %d revoked, %d entries; want none", n, e)
	}
	if err := revokeAudited(nil); err != nil {
		t.Fatal(err)
	}
	if n := count(`SELECT count(*) FROM audit_log WHERE action = 'token_revoke' AND target = '` + want + `'`); n != 1 {
		t.Fatalf("%d token_revoke entries naming %q, want 1", n, want)
	}
}

func TestParseLifetime(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"": 0, "never": 0, " 90d ": 90 * 24 * time.Hour, "1d": 24 * time.Hour, "12h": 12 * time.Hour,
		"30m": 30 * time.Minute, "3650d": tokens.MaxLifetime,
	} {
		if got, err := tokens.ParseLifetime(in); err != nil || got != want {
			t.Errorf("ParseLifetime(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"0d":      `lifetime "0d": want more than nothing and at most 3650d; never for no expiry`,
		"-1h":     `lifetime "-1h": want more than nothing and at most 3650d; never for no expiry`,
		"3651d":   `lifetime "3651d": want a whole number of days up to 3650 (90d), a duration (12h) or never`,
		"1.5d":    `lifetime "1.5d": want a whole number of days up to 3650 (90d), a duration (12h) or never`,
		"90 days": `lifetime "90 days": want days (90d), a duration (12h) or never`,
		"87601h":  `lifetime "87601h": want more than nothing and at most 3650d; never for no expiry`,
	} {
		if _, err := tokens.ParseLifetime(in); err == nil || err.Error() != want {
			t.Errorf("ParseLifetime(%q): %v, want %q", in, err, want)
		}
	}
}
