package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/queue/queuetest"
)

// A connection that opens on a server that takes no writes is refused
// when it opens, even without target_session_attrs in the connection
// string: hookd writes on every path. (Before, it was kept, and every
// delivery on it failed.)
func TestPool_RefusesAStandbyWhenItOpens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pcfg, err := pgxpool.ParseConfig(b.dbURL + "&options=-c%20default_transaction_read_only%3Don")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := open(t.Context(), "DATABASE_URL", pcfg)
	if err == nil {
		pool.Close()
		t.Fatal("a pool on a read-only server opened; want it refused")
	}
	if !strings.Contains(err.Error(), "read only") {
		t.Errorf("error: %v; want it to say the server is read only", err)
	}
	if pcfg.ConnConfig.ConnectTimeout != defaultConnectTimeout {
		t.Errorf("connect timeout: %s, want the default %s", pcfg.ConnConfig.ConnectTimeout, defaultConnectTimeout)
	}
}

// A statement that fails with 25006 (the server stopped taking writes, as
// a demoted primary does) resets the pool: the connection after it is a
// new one, opened on the primary. (Before, the pool kept its connections
// to the old primary.)
func TestPool_ReadOnlyErrorResetsThePool(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pcfg, err := pgxpool.ParseConfig(b.dbURL + "&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := open(t.Context(), "DATABASE_URL", pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var before int
	if err := pool.QueryRow(t.Context(), `SELECT pg_backend_pid()`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	// The session turns read only after it opened, as a server demoted
	// under it does.
	if _, err := pool.Exec(t.Context(), `SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY`); err != nil {
		t.Fatal(err)
	}
	_, err = pool.Exec(t.Context(), `CREATE TABLE written (id int)`)
	if !movedPrimary(err) {
		t.Fatalf("a write on a read-only session: %v; want 25006", err)
	}
	queuetest.WaitFor(t, 10*time.Second, "a new connection after the reset", func() bool {
		var after int
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&after) == nil && after != before
	})
	if _, err := pool.Exec(t.Context(), `CREATE TABLE written (id int)`); err != nil {
		t.Errorf("a write after the reset: %v", err)
	}
}
