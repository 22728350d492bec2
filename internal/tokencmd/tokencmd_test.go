package tokencmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/config"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/tokens"
	"github.com/hookd/hookd/internal/tokencmd"
	"github.com/hookd/hookd/queue/queuetest"
)

// testBundle is what a test of the command works with: its database, for
// the rows a test puts in place and its assertions, and a way to run it.
type testBundle struct {
	pool     *pgxpool.Pool
	accounts *accounts.Store
	dbURL    string
}

// setup returns the bundle of a test on a fresh, migrated database of its
// own. Every test of the package starts with it.
func setup(t *testing.T) *testBundle {
	t.Helper()
	dbURL := queuetest.NewDatabaseURL(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &testBundle{pool: pool, accounts: accounts.New(pool), dbURL: dbURL}
}

// run runs `hookd tokens args...` on the test's database and returns what
// it printed on stdout, and its error.
func (b *testBundle) run(args ...string) (string, error) {
	var out, errOut bytes.Buffer
	getenv := func(k string) string {
		if k == "DATABASE_URL" {
			return b.dbURL
		}
		return ""
	}
	err := tokencmd.Run(context.Background(), args, getenv, &out, &errOut, tokencmd.Deps{
		Open: func(ctx context.Context, cfg config.Config) (*pgxpool.Pool, error) {
			return pgxpool.New(ctx, cfg.DatabaseURL)
		},
		Actor: "command line: tester@host",
	})
	return out.String(), err
}

func TestRun_RefusesWithAReason(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.accounts.CreateUser(ctx, "ana@example.com", "long enough", accounts.RoleViewer); err != nil {
		t.Fatal(err)
	}
	// An account of the identity provider may share a password account's
	// email.
	if _, err := b.pool.Exec(ctx, `
		INSERT INTO users (email, password_hash, role, oidc_issuer, oidc_subject)
		VALUES ('Ana@example.com', '', 'admin', 'https://idp.example.com', 'ana')`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"NoSubcommand", nil, tokencmd.Usage},
		{"UnknownSubcommand", []string{"rotate"}, tokencmd.Usage},
		{"NoName", []string{"create", "--scope", "read", "--account", "ana@example.com"},
			"tokens create needs --name, --scope and --account\n" + tokencmd.Usage},
		{"UnknownScope", []string{"create", "--name", "ci", "--scope", "write", "--account", "1"},
			`--scope: unknown scope "write": want read, operate or admin`},
		{"BadLifetime", []string{"create", "--name", "ci", "--scope", "read", "--expires", "soon", "--account", "1"},
			`--expires: lifetime "soon": want days (90d), a duration (12h) or never`},
		{"UnknownEmail", []string{"create", "--name", "ci", "--scope", "read", "--account", "bob@example.com"},
			"no account for bob@example.com (hookd user add makes one)"},
		{"UnknownID", []string{"create", "--name", "ci", "--scope", "read", "--account", "99"},
			"no account 99 (hookd user add makes one)"},
		{"SharedEmail", []string{"create", "--name", "ci", "--scope", "read", "--account", "ana@example.com"},
			"accounts 1, 2 all have the email ana@example.com: give --account the id of one"},
		{"ScopeAboveRole", []string{"create", "--name", "ci", "--scope", "operate", "--account", "1"},
			"token not created: the scope operate exceeds the role of ana@example.com (viewer), whose tokens may have scope read at most"},
		{"RevokeNoID", []string{"revoke"}, "tokens revoke needs the token's id (hookd tokens list shows them)\n" + tokencmd.Usage},
		{"RevokeNotAnID", []string{"revoke", "deploy"}, `"deploy" is not a token id: want the number hookd tokens list shows`},
		{"RevokeUnknown", []string{"revoke", "7"}, "no token 7 (hookd tokens list shows them)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := b.run(tc.args...); err == nil || err.Error() != tc.want {
				t.Errorf("tokens %v: %v, want %q", tc.args, err, tc.want)
			}
		})
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM api_tokens`); n != 0 {
		t.Errorf("%d tokens after refusals only", n)
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM audit_log`); n != 0 {
		t.Errorf("%d audit entries after refusals only", n)
	}
}

func TestRun_ListsAsJSONAndRevokesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	admin, err := b.accounts.CreateUser(ctx, "admin@example.com", "long enough", accounts.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"first", "second"} {
		if _, err := b.run("create", "--name", name, "--scope", "admin", "--account", "admin@example.com"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.run("revoke", "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.run("revoke", "1"); err == nil || !strings.HasPrefix(err.Error(), "token already revoked: token 1 (first) at ") {
		t.Errorf("revoke twice: %v", err)
	}
	out, err := b.run("list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var listed []tokens.Token
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("list --json printed %q: %v", out, err)
	}
	if len(listed) != 2 || listed[0].Name != "second" || listed[0].RevokedAt != nil || listed[0].ExpiresAt != nil ||
		listed[1].Name != "first" || listed[1].RevokedAt == nil || listed[1].AccountID != admin.ID {
		t.Errorf("list --json = %+v", listed)
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM audit_log
		WHERE user_email = 'command line: tester@host' AND action = 'token_revoke'`); n != 1 {
		t.Errorf("%d token_revoke entries after a revoke and a refused second one, want 1", n)
	}
}
