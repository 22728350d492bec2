package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/config"
	"github.com/hookd/hookd/internal/tracing"
	"github.com/hookd/hookd/migrations"
	"github.com/hookd/hookd/queue"
)

// openPool connects to DATABASE_URL and checks it answers: pgxpool.New does
// not connect, and a wrong DATABASE_URL should stop the program at start.
func openPool(ctx context.Context, cfg config.Config, opts ...poolOption) (*pgxpool.Pool, error) {
	// A delivery holds a connection only for its two short transactions,
	// never while the app runs, but the receiver's two group commits, the
	// retry loop's claims and outcomes, the dashboard and /readyz all run
	// at once, and pgxpool's default of max(4, CPUs) would queue them behind
	// each other. pool_max_conns in DATABASE_URL still wins.
	return connect(ctx, "DATABASE_URL", cfg.DatabaseURL, defaultMaxConns, opts...)
}

// poolOption changes a pool's configuration before it is opened.
type poolOption func(*pgxpool.Config)

// traced makes each statement a pool runs under a traced span a child span
// of it; with tracing off (t nil) it changes nothing.
func traced(t *tracing.Tracer) poolOption {
	return func(pcfg *pgxpool.Config) {
		if qt := t.QueryTracer(); qt != nil {
			pcfg.ConnConfig.Tracer = qt
		}
	}
}

// defaultMaxConns leaves room for three replicas under PostgreSQL's default
// max_connections of 100.
const defaultMaxConns = 30

// migrateConns is the size of the migrations' own pool: one for the
// migrations, one for the heartbeat of goose's lock row.
const migrateConns = 2

// openDashboardPool opens the dashboard's own pool on DATABASE_URL, of
// HOOKD_DASHBOARD_CONNS connections whatever pool_max_conns says: that
// sizes the receiver's pool, and the point of this one is to stay small.
func openDashboardPool(ctx context.Context, cfg config.Config, opts ...poolOption) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %v", err)
	}
	for _, o := range opts {
		o(pcfg)
	}
	pcfg.MaxConns = int32(cfg.DashboardConns)
	pcfg.MinConns = min(pcfg.MinConns, pcfg.MaxConns)
	return open(ctx, "DATABASE_URL", pcfg)
}

// openBeatPool opens the heartbeat's own connection: a beat that waited for
// one of the main pool's behind a burst of work would let this replica's
// leases look silent, and fence its processors, for nothing.
func openBeatPool(ctx context.Context, cfg config.Config) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %v", err)
	}
	pcfg.MaxConns, pcfg.MinConns = 1, 0
	return open(ctx, "DATABASE_URL", pcfg)
}

// connect opens a pool of maxConns connections (unless the connection
// string sets pool_max_conns) on the database named by setting and checks it
// answers.
func connect(ctx context.Context, setting, connString string, maxConns int32, opts ...poolOption) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", setting, err)
	}
	for _, o := range opts {
		o(pcfg)
	}
	if !strings.Contains(connString, "pool_max_conns") {
		pcfg.MaxConns = maxConns
	}
	return open(ctx, setting, pcfg)
}

// open opens the pool pcfg describes, hardened for a failover (harden),
// and checks it answers.
func open(ctx context.Context, setting string, pcfg *pgxpool.Config) (*pgxpool.Pool, error) {
	opened := harden(pcfg)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", setting, err)
	}
	opened(pool)
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database at %s (%s): %v", queue.DescribeDB(&pcfg.ConnConfig.Config), setting, err)
	}
	return pool, nil
}

// applyMigrations applies the pending migrations over the migrate URL, on a
// pool of its own closed before it returns, and returns the files it
// applied. goose's lock is a row of a table, not a session lock, so the
// migrate URL may go through PgBouncer in transaction pooling mode too.
func applyMigrations(ctx context.Context, cfg config.Config) ([]string, error) {
	setting, connString := cfg.MigrateURL()
	pool, err := connect(ctx, setting, connString, migrateConns)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	return migrations.Up(ctx, pool)
}

// openMigrated applies the pending migrations, then opens the pool on
// DATABASE_URL, returning the files it applied: every command that touches
// the database starts so.
func openMigrated(ctx context.Context, cfg config.Config, opts ...poolOption) (*pgxpool.Pool, []string, error) {
	applied, err := applyMigrations(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	pool, err := openPool(ctx, cfg, opts...)
	if err != nil {
		return nil, nil, err
	}
	return pool, applied, nil
}

// openCurrent opens the pool on a database whose schema is this binary's,
// and changes nothing: for a command that promises to change nothing (a
// dry run), it is an error to find migrations pending, since applying
// them is a change, and one the upgrade steps order with the replicas.
func openCurrent(ctx context.Context, cfg config.Config) (*pgxpool.Pool, error) {
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return nil, err
	}
	st, err := migrations.Check(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	if len(st.Pending) > 0 {
		pool.Close()
		return nil, fmt.Errorf("the database's schema is %d migrations behind this hookd (%s): run hookd migrate first, "+
			"as this command changes nothing", len(st.Pending), strings.Join(st.Pending, ", "))
	}
	return pool, nil
}

func migrate(ctx context.Context, cfg config.Config, stdout io.Writer) error {
	applied, err := applyMigrations(ctx, cfg)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintln(stdout, "migrate: schema is up to date")
	}
	for _, name := range applied {
		fmt.Fprintln(stdout, "migrate: applied", name)
	}
	return nil
}

// Reaching the primary across a failover (SPEC.md, "Faults"): DATABASE_URL
// may name several hosts with target_session_attrs=read-write, and each
// pool hookd opens is made so that no host can hang it and no connection to
// a standby stays in it.

const (
	// defaultConnectTimeout bounds a connection's opening when
	// DATABASE_URL sets no connect_timeout: a host that vanished without
	// closing its sockets, or a server frozen, would otherwise hold each
	// new connection until the kernel gives up, minutes later.
	defaultConnectTimeout = 5 * time.Second
	// keepAliveIdle, keepAliveInterval and keepAliveCount are the TCP
	// keepalives of every connection: a host gone silent is found out
	// within about 30 s, not the two hours of the kernel's default.
	keepAliveIdle     = 15 * time.Second
	keepAliveInterval = 5 * time.Second
	keepAliveCount    = 3
	// resetEvery is the least time between two resets of one pool: the
	// errors of one failover arrive together, and one reset answers them.
	resetEvery = time.Second
	// pingTimeout bounds the ping pgxpool sends on a connection idle over
	// a second before it lends it, unless the connection string sets
	// pool_ping_timeout. Without it the ping of a connection to a frozen
	// server lasts as long as the borrower's context, and once that is
	// cancelled (a loop told to stop) pgxpool lets it go on for a minute,
	// holding the connection, and the pool's close at the stop waits for
	// it. A ping that fails only costs the connection: the borrower gets
	// another.
	pingTimeout = 2 * time.Second
)

// harden makes pcfg's connections bounded and checked: a connect timeout
// and a ping timeout unless the connection string has them, TCP
// keepalives, a check when each connection opens that its server takes
// writes (target_session_attrs' own check when the string sets it;
// otherwise the same check), and a pool reset on the errors of a server
// that stopped being the primary. It returns the function to call with
// the pool once it is open.
func harden(pcfg *pgxpool.Config) func(*pgxpool.Pool) {
	cc := &pcfg.ConnConfig.Config
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = defaultConnectTimeout
	}
	if pcfg.PingTimeout == 0 {
		pcfg.PingTimeout = pingTimeout
	}
	dialer := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{
		Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount,
	}}
	cc.DialFunc = dialer.DialContext
	if cc.ValidateConnect == nil {
		// A standby found when the connection opens is dropped, and the
		// next host tried: hookd writes on every path. Only here, not at
		// every checkout: a delivery's cost stays two round trips.
		cc.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsReadWrite
	}
	r := &poolResetter{inner: pcfg.ConnConfig.Tracer}
	pcfg.ConnConfig.Tracer = r
	return r.pool.Store
}

// poolCloseTimeout bounds the wait for one pool's close at the stop. By
// then every part of hookd has stopped, and what a close still waits for is
// pgx closing connections to a server that does not answer (a frozen
// primary): it gives each a cancel request and up to 15 s. The process's
// exit closes those sockets as well.
const poolCloseTimeout = 2 * time.Second

// closePool closes pool, waiting at most timeout, and says what it left
// to the exit.
func closePool(pool *pgxpool.Pool, name string, timeout time.Duration, logger *slog.Logger) {
	closed := make(chan struct{})
	go func() {
		pool.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(timeout):
		logger.Warn("connections to a database server that does not answer are still closing; the exit closes them",
			"pool", name, "waited", timeout)
	}
}

// movedPrimary is true for the errors of a server that is no longer the
// primary: 25006 (read_only_sql_transaction: a demoted primary, or a
// standby) and 57P01 (admin_shutdown: the server is shutting down, as a
// primary being failed over does).
func movedPrimary(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "25006" || pgErr.Code == "57P01")
}

// poolResetter is a pgx tracer that resets its pool when a statement
// fails with movedPrimary's errors: every connection of the pool goes to
// the same server, so the others are as stale, and the connections opened
// after the reset find the new primary. It passes every trace on to inner
// (the tracing's, or nil).
type poolResetter struct {
	inner pgx.QueryTracer
	pool  atomic.Pointer[pgxpool.Pool]
	mu    sync.Mutex
	last  time.Time
}

func (r *poolResetter) seen(err error) {
	if err == nil || !movedPrimary(err) {
		return
	}
	p := r.pool.Load()
	if p == nil {
		return
	}
	r.mu.Lock()
	due := time.Since(r.last) >= resetEvery
	if due {
		r.last = time.Now()
	}
	r.mu.Unlock()
	if !due {
		return
	}
	slog.Warn("the database server stopped being the primary: every connection of the pool is closed, "+
		"and the next ones find the primary", "err", err)
	// Reset waits for nothing, but the statement that failed still holds
	// its connection: it is closed when given back.
	go p.Reset()
}

func (r *poolResetter) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if r.inner != nil {
		return r.inner.TraceQueryStart(ctx, conn, data)
	}
	return ctx
}

func (r *poolResetter) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	r.seen(data.Err)
	if r.inner != nil {
		r.inner.TraceQueryEnd(ctx, conn, data)
	}
}

func (r *poolResetter) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	if t, ok := r.inner.(pgx.BatchTracer); ok {
		return t.TraceBatchStart(ctx, conn, data)
	}
	return ctx
}

func (r *poolResetter) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchQueryData) {
	r.seen(data.Err)
	if t, ok := r.inner.(pgx.BatchTracer); ok {
		t.TraceBatchQuery(ctx, conn, data)
	}
}

func (r *poolResetter) TraceBatchEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchEndData) {
	r.seen(data.Err)
	if t, ok := r.inner.(pgx.BatchTracer); ok {
		t.TraceBatchEnd(ctx, conn, data)
	}
}

func (r *poolResetter) TraceConnectStart(ctx context.Context, data pgx.TraceConnectStartData) context.Context {
	if t, ok := r.inner.(pgx.ConnectTracer); ok {
		return t.TraceConnectStart(ctx, data)
	}
	return ctx
}

func (r *poolResetter) TraceConnectEnd(ctx context.Context, data pgx.TraceConnectEndData) {
	if t, ok := r.inner.(pgx.ConnectTracer); ok {
		t.TraceConnectEnd(ctx, data)
	}
}

func (r *poolResetter) TracePrepareStart(ctx context.Context, conn *pgx.Conn, data pgx.TracePrepareStartData) context.Context {
	if t, ok := r.inner.(pgx.PrepareTracer); ok {
		return t.TracePrepareStart(ctx, conn, data)
	}
	return ctx
}

func (r *poolResetter) TracePrepareEnd(ctx context.Context, conn *pgx.Conn, data pgx.TracePrepareEndData) {
	r.seen(data.Err)
	if t, ok := r.inner.(pgx.PrepareTracer); ok {
		t.TracePrepareEnd(ctx, conn, data)
	}
}

func (r *poolResetter) TraceCopyFromStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceCopyFromStartData) context.Context {
	if t, ok := r.inner.(pgx.CopyFromTracer); ok {
		return t.TraceCopyFromStart(ctx, conn, data)
	}
	return ctx
}

func (r *poolResetter) TraceCopyFromEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceCopyFromEndData) {
	r.seen(data.Err)
	if t, ok := r.inner.(pgx.CopyFromTracer); ok {
		t.TraceCopyFromEnd(ctx, conn, data)
	}
}
