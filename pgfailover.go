package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

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
)

// harden makes pcfg's connections bounded and checked: a connect timeout
// unless the connection string has one, TCP keepalives, a check when each
// connection opens that its server takes writes (target_session_attrs'
// own check when the string sets it; otherwise the same check), and a pool
// reset on the errors of a server that stopped being the primary.
// It returns the function to call with the pool once it is open.
func harden(pcfg *pgxpool.Config) func(*pgxpool.Pool) {
	cc := &pcfg.ConnConfig.Config
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = defaultConnectTimeout
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
