package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookd/hookd/internal/config"
	"github.com/hookd/hookd/migrations"
	"github.com/hookd/hookd/queue/queuetest"
)

func TestParseConfig_MigrateDatabaseURL(t *testing.T) {
	t.Parallel()
	const (
		pooled  = "postgres://hookd:pooled-secret@pgbouncer:6432/hookd?default_query_exec_mode=cache_describe"
		direct  = "postgres://hookd:direct-secret@db:5432/hookd"
		flagged = "postgres://hookd:flag-secret@db2:5432/hookd"
	)
	cases := []struct {
		name        string
		env         map[string]string
		args        []string
		wantSetting string
		wantURL     string
	}{
		{"UnsetIsDatabaseURL", map[string]string{"DATABASE_URL": pooled}, nil, "DATABASE_URL", pooled},
		{"Environment", map[string]string{"DATABASE_URL": pooled, "HOOKD_MIGRATE_DATABASE_URL": direct}, nil,
			"HOOKD_MIGRATE_DATABASE_URL", direct},
		{"FlagOverridesEnvironment", map[string]string{"DATABASE_URL": pooled, "HOOKD_MIGRATE_DATABASE_URL": direct},
			[]string{"-migrate-database-url", flagged}, "HOOKD_MIGRATE_DATABASE_URL", flagged},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := config.Parse("serve", tc.args, envOf(tc.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.DatabaseURL != pooled {
				t.Errorf("DATABASE_URL = %q, want %q whatever migrations use", cfg.DatabaseURL, pooled)
			}
			if setting, u := cfg.MigrateURL(); setting != tc.wantSetting || u != tc.wantURL {
				t.Errorf("migrations use %s = %q, want %s = %q", setting, u, tc.wantSetting, tc.wantURL)
			}
		})
	}

	// A secret, like DATABASE_URL: -h lists it without the environment's value.
	var help bytes.Buffer
	_, err := config.Parse("serve", []string{"-h"}, envOf(map[string]string{"HOOKD_MIGRATE_DATABASE_URL": direct}), &help)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: err = %v, want flag.ErrHelp", err)
	}
	if !strings.Contains(help.String(), "-migrate-database-url") || !strings.Contains(help.String(), "$HOOKD_MIGRATE_DATABASE_URL") {
		t.Errorf("-h does not list -migrate-database-url [$HOOKD_MIGRATE_DATABASE_URL]:\n%s", help.String())
	}
	if strings.Contains(help.String(), "direct-secret") {
		t.Error("-h shows HOOKD_MIGRATE_DATABASE_URL's value")
	}
}

// unmigratedDatabaseURL is a fresh database with the helper's schema
// dropped, as a first install sees it.
func unmigratedDatabaseURL(t *testing.T) string {
	t.Helper()
	bundle := setup(t)
	if _, err := bundle.pool.Exec(t.Context(), `DROP SCHEMA public CASCADE; CREATE SCHEMA public`); err != nil {
		t.Fatal(err)
	}
	return bundle.dbURL
}

// countIn runs sql, a query returning one integer, on its own connection to
// databaseURL.
func countIn(t *testing.T, databaseURL, sql string) int64 {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int64
	if err := conn.QueryRow(t.Context(), sql).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

const appliedSQL = `SELECT count(*) FROM goose_db_version WHERE version_id > 0 AND is_applied`

// Migrations go to HOOKD_MIGRATE_DATABASE_URL alone: hookd migrate needs
// nothing else, and every other command migrates there before it opens
// DATABASE_URL.
func TestRun_MigrateUsesTheMigrateDatabaseURL(t *testing.T) {
	t.Parallel()
	direct := unmigratedDatabaseURL(t)
	// Nothing listens on port 1.
	env := envOf(map[string]string{
		"DATABASE_URL":               "postgres://hookd:x@127.0.0.1:1/pooled?connect_timeout=2",
		"HOOKD_MIGRATE_DATABASE_URL": direct,
	})

	var out bytes.Buffer
	if err := run(t.Context(), []string{"migrate"}, env, nil, &out, &out); err != nil {
		t.Fatalf("migrate with DATABASE_URL unreachable: %v", err)
	}
	if !strings.Contains(out.String(), "applied 00001_webhook_queue.sql") || countIn(t, direct, appliedSQL) == 0 {
		t.Fatalf("migrate printed %q, want the migrations applied over HOOKD_MIGRATE_DATABASE_URL", out.String())
	}

	// A command that needs both: the migrations are there, then
	// DATABASE_URL is the one that fails, and the error says so.
	err := run(t.Context(), []string{"user", "add", "ops@example.com"}, env, strings.NewReader("correct horse battery\n"),
		io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "connect to database at 127.0.0.1:1/pooled as hookd (DATABASE_URL)") {
		t.Fatalf("user add: err = %v, want DATABASE_URL's connection refused after migrating", err)
	}

	// And a migrate URL that does not answer is named as such.
	env = envOf(map[string]string{"DATABASE_URL": direct,
		"HOOKD_MIGRATE_DATABASE_URL": "postgres://migrator:x@127.0.0.1:1/direct?connect_timeout=2"})
	err = run(t.Context(), []string{"migrate"}, env, nil, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "connect to database at 127.0.0.1:1/direct as migrator (HOOKD_MIGRATE_DATABASE_URL)") {
		t.Fatalf("migrate: err = %v, want HOOKD_MIGRATE_DATABASE_URL's connection refused", err)
	}
}

// hookd serve behind PgBouncer in transaction pooling mode: it migrates a
// new database over the direct HOOKD_MIGRATE_DATABASE_URL, then receives,
// queues, retries and answers through the pooler.
func TestRunServeBehindPgBouncerMigratesDirectly(t *testing.T) {
	t.Parallel()
	direct := unmigratedDatabaseURL(t)
	pooled := queuetest.PgBouncerURL(t, direct)
	// The app fails each event's inline attempt and takes its first retry,
	// so every event goes through the queue and the retry loop.
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Hookd-Attempt") == "0" {
			http.Error(w, "not yet", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(app.Close)

	base, stop, stderr := startServe(t, map[string]string{
		"DATABASE_URL":               pooled,
		"HOOKD_MIGRATE_DATABASE_URL": direct,
		"STRIPE_WEBHOOK_SECRET":      testSecret,
		"HOOKD_FORWARD_URL":          app.URL,
		"HOOKD_DEMO_BACKOFF":         "true",
		"HOOKD_RETRY_INTERVAL":       "50ms",
	})
	if !strings.Contains(stderr.String(), "migration applied") || countIn(t, direct, appliedSQL) == 0 {
		t.Fatalf("no migration applied at start:\n%s", stderr)
	}

	var out bytes.Buffer
	err := run(t.Context(), []string{"send-test-event", "-n", "30", "-url", base + "/webhooks/stripe"},
		envOf(map[string]string{"STRIPE_WEBHOOK_SECRET": testSecret}), strings.NewReader(""), &out, io.Discard)
	if err != nil || !strings.Contains(out.String(), "sent 30 events: 30 ") {
		t.Fatalf("send-test-event through hookd behind PgBouncer: %v\n%s\n%s", err, out.String(), stderr)
	}
	queuetest.WaitFor(t, 15*time.Second, "every event retried and processed", func() bool {
		return countIn(t, direct, `SELECT count(*) FROM processed_webhook_events`) == 30 &&
			countIn(t, direct, `SELECT count(*) FROM webhook_events`) == 0
	})
	if n := countIn(t, direct, `SELECT count(*) FROM webhook_attempts WHERE path = 'retry' AND outcome = 'succeeded'`); n != 30 {
		t.Errorf("%d events taken by a retry, want all 30", n)
	}
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz answered %d, want 200", resp.StatusCode)
	}

	if err := stop(); err != nil {
		t.Fatalf("run after cancel: %v\n%s", err, stderr)
	}
	if logs := stderr.String(); strings.Contains(logs, "level=ERROR") {
		t.Errorf("errors logged behind PgBouncer:\n%s", logs)
	}
}

// Without HOOKD_MIGRATE_DATABASE_URL, migrations go through PgBouncer in
// transaction pooling mode: two replicas migrating one new database at once
// apply each migration once, and no lock is left on a server connection
// for a later start to stall on.
func TestRun_MigrateThroughPgBouncerHoldsNoSessionLock(t *testing.T) {
	t.Parallel()
	direct := unmigratedDatabaseURL(t)
	pooled := queuetest.PgBouncerURL(t, direct)
	env := envOf(map[string]string{"DATABASE_URL": pooled})

	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- run(t.Context(), []string{"migrate"}, env, nil, io.Discard, io.Discard) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("migrate through PgBouncer: %v", err)
		}
	}
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if n := countIn(t, direct, appliedSQL); n != int64(len(files)) {
		t.Errorf("%d migrations applied, want each of the %d once", n, len(files))
	}
	if n := countIn(t, direct, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`); n != 0 {
		t.Errorf("%d advisory locks held after migrating, want none", n)
	}
	// A third start finds nothing to do and does not wait for a lock.
	var out bytes.Buffer
	if err := run(t.Context(), []string{"migrate"}, env, nil, &out, io.Discard); err != nil ||
		!strings.Contains(out.String(), "schema is up to date") {
		t.Fatalf("migrate again through PgBouncer: %v\n%s", err, out.String())
	}
}
