// Package queuetest gives tests a real, migrated PostgreSQL database of their
// own, factories that put queue rows in any state, and the seed's
// single-event API (Seed).
package queuetest

// The first caller in a test binary migrates a template database, named by a
// hash of the migrations so a schema change makes a new one; every test then
// gets a clone of it (CREATE DATABASE ... TEMPLATE, a few milliseconds), so
// tests run in parallel without seeing each other's rows. A clone is dropped
// when its test passes and kept, with its URL logged, when it fails.
// PgBouncerURL reaches such a database through PgBouncer in transaction
// pooling mode, as hookd runs in production.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/migrations"
	"github.com/hookd/hookd/queue"
)

// DefaultURL is the server the tests use when TEST_DATABASE_URL is unset:
// the local one `make db` starts.
const DefaultURL = "postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable"

// ServerURL is the URL of the server tests create their databases on.
func ServerURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

var template struct {
	once sync.Once
	name string
	err  error
}

// NewDatabaseURL creates a fresh, migrated database for t and returns its URL.
// Without a reachable server the test fails, saying how to start one.
func NewDatabaseURL(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	server := ServerURL()

	template.once.Do(func() { template.name, template.err = ensureTemplate(ctx, server) })
	if template.err != nil {
		t.Fatalf("queuetest: %v\n\nThe tests need a PostgreSQL server at %s (set TEST_DATABASE_URL to use another).\n"+
			"Start the local one with `make db` (it runs .ci/postgres.sh).", template.err, redact(server))
	}

	name := "hookd_test_" + randomHex(6)
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatalf("queuetest: connect to %s: %v", redact(server), err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %s TEMPLATE %s`, name, template.name)); err != nil {
		t.Fatalf("queuetest: clone template: %v", err)
	}
	dbURL := withDatabase(server, name)
	if err := seedUnlogged(ctx, dbURL); err != nil {
		t.Fatalf("queuetest: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("queuetest: kept the failed test's database: %s", redact(dbURL))
			return
		}
		conn, err := pgx.Connect(context.Background(), server)
		if err != nil {
			t.Errorf("queuetest: drop %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), fmt.Sprintf(`DROP DATABASE %s WITH (FORCE)`, name)); err != nil {
			t.Errorf("queuetest: drop %s: %v", name, err)
		}
	})
	return dbURL
}

// seedUnlogged writes again the rows of unlogged tables that migrations seed.
// PostgreSQL empties unlogged tables in crash recovery, the template's too,
// so a template built before the server last crashed clones into a database
// whose lease_epoch says leases were just lost: every lease would be
// refused for the lease grace (queue/replicas.go). A clone is a new
// database no replica has leased in, which is what the migration's row
// says.
func seedUnlogged(ctx context.Context, dbURL string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("connect to the clone: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO lease_epoch (began_at) VALUES ('-infinity') ON CONFLICT (one) DO NOTHING`); err != nil {
		return fmt.Errorf("seed lease_epoch: %w", err)
	}
	return nil
}

// NewPool returns a pool on a fresh database for t, closed when t ends.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(NewDatabaseURL(t))
	if err != nil {
		t.Fatalf("queuetest: %v", err)
	}
	// Enough connections for the race tests' goroutines to really overlap.
	cfg.MaxConns = 32
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("queuetest: open pool: %v", err)
	}
	// Registered after the database's own cleanup, so it runs first.
	t.Cleanup(pool.Close)
	return pool
}

// NewStore returns a Store on a fresh database for t, and its pool for the
// assertions a test makes in SQL.
func NewStore(t testing.TB) (*queue.Store, *pgxpool.Pool) {
	t.Helper()
	pool := NewPool(t)
	return queue.New(pool), pool
}

// ensureTemplate creates and migrates the template database once per schema.
// Test binaries of several packages run at once, so creation happens under an
// advisory lock, into a temporary name renamed only when complete: nobody
// ever clones a half-migrated template.
func ensureTemplate(ctx context.Context, server string) (string, error) {
	hash, err := migrationsHash()
	if err != nil {
		return "", err
	}
	name := "hookd_template_" + hash

	connectCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	admin, err := pgx.Connect(connectCtx, server)
	if err != nil {
		return "", fmt.Errorf("cannot connect: %w", err)
	}
	defer admin.Close(ctx)

	if _, err := admin.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended('hookd_queuetest_template', 0))`); err != nil {
		return "", fmt.Errorf("lock template: %w", err)
	}
	defer admin.Exec(ctx, `SELECT pg_advisory_unlock(hashtextextended('hookd_queuetest_template', 0))`)

	var exists bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", fmt.Errorf("look for template: %w", err)
	}
	if exists {
		return name, nil
	}

	building := name + "_building"
	if _, err := admin.Exec(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %s WITH (FORCE)`, building)); err != nil {
		return "", fmt.Errorf("drop stale template: %w", err)
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %s`, building)); err != nil {
		return "", fmt.Errorf("create template: %w", err)
	}
	pool, err := pgxpool.New(ctx, withDatabase(server, building))
	if err != nil {
		return "", fmt.Errorf("open template: %w", err)
	}
	_, err = migrations.Up(ctx, pool)
	pool.Close()
	if err != nil {
		return "", fmt.Errorf("migrate template: %w", err)
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s RENAME TO %s`, building, name)); err != nil {
		return "", fmt.Errorf("publish template: %w", err)
	}
	return name, nil
}

func migrationsHash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash migrations: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

func withDatabase(server, name string) string {
	u, err := url.Parse(server)
	if err != nil {
		panic(fmt.Sprintf("queuetest: bad server URL: %v", err))
	}
	u.Path = "/" + name
	return u.String()
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// NewAccounts returns an accounts Store on a fresh database for t, and its
// pool for the assertions a test makes in SQL.
func NewAccounts(t testing.TB) (*accounts.Store, *pgxpool.Pool) {
	t.Helper()
	pool := NewPool(t)
	return accounts.New(pool), pool
}
