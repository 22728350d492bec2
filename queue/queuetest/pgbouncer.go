package queuetest

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultPgBouncerURL is the PgBouncer the tests use when TEST_PGBOUNCER_URL
// is unset: the local one `make pgbouncer` starts, in transaction pooling
// mode in front of DefaultURL's server.
const DefaultPgBouncerURL = "postgres://postgres:postgres@127.0.0.1:6432/postgres?sslmode=disable"

// PgBouncerExecMode is the pgx query execution mode hookd needs behind
// PgBouncer in transaction pooling mode, as a connection string setting.
//
// pgx's default, cache_statement, prepares a named statement on a server
// connection and runs it there later; in transaction pooling the next
// transaction may get another server connection, which never heard of it
// (or already has one of that name), and PgBouncer 1.18, Debian 12's, cannot
// carry named prepared statements across (max_prepared_statements came in
// 1.21). describe_exec fails the same way: its two round trips may land on
// two server connections. cache_describe prepares nothing named: it asks the
// server once per client connection for a statement's parameter and result
// types, caches them, and then sends each query as Parse, Bind and Execute
// of the unnamed statement in one round trip, needing nothing left on the
// server. exec would work too, but it sends every parameter and result as
// text with types guessed from the Go values; cache_describe keeps the
// binary format and the server's own types. Its one risk, a cached
// description gone stale when the schema changes under a running process,
// is the default mode's too, and hookd migrates before it serves.
const PgBouncerExecMode = "cache_describe"

// PgBouncerServerURL is the URL of the PgBouncer in front of ServerURL's
// server; only its address, user and password are used.
func PgBouncerServerURL() string {
	if u := os.Getenv("TEST_PGBOUNCER_URL"); u != "" {
		return u
	}
	return DefaultPgBouncerURL
}

// PgBouncerURL returns the URL of databaseURL's database (one NewDatabaseURL
// made) through the PgBouncer at PgBouncerServerURL, with
// default_query_exec_mode=PgBouncerExecMode unless that URL sets a mode.
//
// It connects through PgBouncer first. When nothing answers there, the test
// fails when CI=true and is skipped otherwise, saying how to start it; a
// PgBouncer that answers but cannot reach the database fails the test.
func PgBouncerURL(t testing.TB, databaseURL string) string {
	t.Helper()
	db, err := url.Parse(databaseURL)
	if err != nil {
		t.Fatalf("queuetest: bad database URL: %v", err)
	}
	u, err := url.Parse(PgBouncerServerURL())
	if err != nil {
		t.Fatalf("queuetest: TEST_PGBOUNCER_URL: %v", err)
	}
	u.Path = db.Path
	q := u.Query()
	if q.Get("default_query_exec_mode") == "" {
		q.Set("default_query_exec_mode", PgBouncerExecMode)
	}
	u.RawQuery = q.Encode()
	pooled := u.String()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pooled)
	if err == nil {
		err = conn.Ping(ctx)
		conn.Close(ctx)
	}
	var dial *net.OpError
	switch {
	case err == nil:
		return pooled
	case errors.As(err, &dial) && os.Getenv("CI") != "true":
		t.Skipf("queuetest: no PgBouncer answers at %s (%v).\n"+
			"Start the local one with `make pgbouncer` (it runs .ci/postgres.sh, then .ci/pgbouncer.sh), "+
			"or set TEST_PGBOUNCER_URL to use another.", u.Host, err)
	case errors.As(err, &dial):
		t.Fatalf("queuetest: no PgBouncer answers at %s (%v).\n"+
			"CI=true, so this test fails rather than skips: `make test` starts PgBouncer with .ci/pgbouncer.sh.", u.Host, err)
	default:
		t.Fatalf("queuetest: through PgBouncer at %s: %v", redact(pooled), strings.TrimSpace(err.Error()))
	}
	return ""
}
