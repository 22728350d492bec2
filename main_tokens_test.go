package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/store/tokens"
	"github.com/hookd/hookd/queue/queuetest"
)

// TestRun_TokensBootstrapTheFirstToken: on a database hookd has never
// started on, `hookd user add` and `hookd tokens create` make the first
// token, whose secret is on stdout alone (not on stderr, which a
// pipeline's log keeps) and authenticates; `tokens list` shows it and
// `tokens revoke` ends it, each change audited in the command line's name.
func TestRun_TokensBootstrapTheFirstToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := unmigratedDatabaseURL(t)
	env := envOf(map[string]string{"DATABASE_URL": dbURL})
	hookd := func(stdin string, args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		err := run(ctx, args, env, strings.NewReader(stdin), &out, &errOut)
		return out.String(), errOut.String(), err
	}
	if _, _, err := hookd("long enough\n", "user", "add", "ops@example.com", "-role", "operator"); err != nil {
		t.Fatal(err)
	}

	out, explained, err := hookd("", "tokens", "create", "--name", "deploy pipeline", "--scope", "operate",
		"--expires", "90d", "--account", "OPS@example.com")
	if err != nil {
		t.Fatalf("tokens create: %v", err)
	}
	secret := strings.TrimSuffix(out, "\n")
	if !strings.HasPrefix(secret, "hkd_") || len(secret) != 47 || strings.Count(out, "\n") != 1 {
		t.Fatalf("tokens create printed %q on stdout, want the secret alone", out)
	}
	for _, want := range []string{"Created token 1 (deploy pipeline) for ops@example.com, scope operate, expires ",
		"shown this once", "Authorization: Bearer hkd_...", "hookd tokens revoke 1"} {
		if !strings.Contains(explained, want) {
			t.Errorf("tokens create said %q, want it to say %q", explained, want)
		}
	}
	if strings.Contains(explained, secret) {
		t.Errorf("tokens create wrote the secret on stderr too, which a pipeline's log keeps: %q", explained)
	}

	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store := tokens.New(pool)
	tok, err := store.Authenticate(ctx, secret)
	if err != nil || tok.ID != 1 || tok.Scope != tokens.ScopeOperate || tok.AccountEmail != "ops@example.com" {
		t.Fatalf("Authenticate(printed secret) = %+v, %v", tok, err)
	}

	if _, _, err := hookd("", "tokens", "create", "--name", "too wide", "--scope", "admin", "--account", "ops@example.com"); err == nil ||
		!strings.Contains(err.Error(), "the scope admin exceeds the role of ops@example.com (operator)") {
		t.Errorf("an admin token for an operator: %v", err)
	}

	out, _, err = hookd("", "tokens", "list")
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 ||
		!strings.HasPrefix(lines[0], "ID  NAME") || !strings.Contains(lines[1], "deploy pipeline  operate  ops@example.com") {
		t.Errorf("tokens list printed\n%s", out)
	}

	out, _, err = hookd("", "tokens", "revoke", "1")
	if want := "revoked token 1 (deploy pipeline) of ops@example.com: every request with it is refused from now on\n"; err != nil || out != want {
		t.Errorf("tokens revoke = %q, %v; want %q", out, err, want)
	}
	if _, err := store.Authenticate(ctx, secret); !errors.Is(err, tokens.ErrRefused) {
		t.Errorf("Authenticate after tokens revoke: %v, want refused", err)
	}
	for action, n := range map[string]int64{"token_create": 1, "token_revoke": 1} {
		if got := queuetest.Count(t, pool, fmt.Sprintf(`SELECT count(*) FROM audit_log
			WHERE action = '%s' AND user_email LIKE 'command line: %%@%%' AND target LIKE 'token 1 (deploy pipeline)%%'`, action)); got != n {
			t.Errorf("%d %s entries in the command line's name, want %d", got, action, n)
		}
	}
}
