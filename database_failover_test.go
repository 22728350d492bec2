package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/e2e/e2etest"
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

// A connection to a frozen server (its processes stopped, its sockets
// open, as when its host vanishes) holds no stop. Its ping, abandoned by a
// borrower told to stop, times out (pgxpool alone lets such a ping go on
// for a minute), and pgx then closes it with a cancel request the server
// never answers, for up to 15 s, which the pool's close waits for: hookd's
// stop waits for that close no longer than poolCloseTimeout. (Before,
// hookd was still running 20 s after SIGTERM.)
func TestPool_AFrozenServerHoldsNoStop(t *testing.T) {
	t.Parallel()
	n := newPGNode(t, "frozen")
	n.run("initdb", "-D", n.data, "-U", "postgres", "--auth=trust", "--no-sync")
	n.start()
	pcfg, err := pgxpool.ParseConfig(n.url("postgres") + "&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	// pgxpool pings a connection idle over a second; here every one is
	// pinged, and the first ping after the freeze says so.
	var frozen atomic.Bool
	pinging := make(chan struct{})
	var once sync.Once
	pcfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool {
		if frozen.Load() {
			once.Do(func() { close(pinging) })
		}
		return true
	}
	pool, err := open(t.Context(), "DATABASE_URL", pcfg)
	if err != nil {
		t.Fatal(err)
	}
	if pcfg.PingTimeout != pingTimeout {
		t.Errorf("ping timeout: %s, want the default %s", pcfg.PingTimeout, pingTimeout)
	}
	n.freeze()
	frozen.Store(true)

	// A borrower without a deadline, told to stop while its connection is
	// pinged.
	ctx, stop := context.WithCancel(t.Context())
	acquired := make(chan error, 1)
	go func() {
		c, err := pool.Acquire(ctx)
		if err == nil {
			c.Release()
		}
		acquired <- err
	}()
	<-pinging
	stop()
	if err := <-acquired; !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire from a frozen server: %v; want it cancelled", err)
	}
	var log e2etest.SyncBuffer
	closed := make(chan struct{})
	go func() {
		closePool(pool, "main", poolCloseTimeout, slog.New(slog.NewTextHandler(&log, nil)))
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("closePool still waits 30 s after it was called")
	}
	if !strings.Contains(log.String(), "still closing") {
		t.Errorf("closePool's log: %q; want it to say what it left to the exit", log.String())
	}
}
