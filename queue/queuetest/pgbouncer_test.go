package queuetest_test

import (
	"cmp"
	"fmt"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// The queue's ordinary calls work on a pool whose connections go through
// PgBouncer in transaction pooling mode: more client connections than the
// pool has server connections for, each statement on whichever server
// connection is free, no named prepared statement surviving between them.
func TestPgBouncerURL_QueueCallsWorkThroughTransactionPooling(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	direct := queuetest.NewDatabaseURL(t)
	pooled := queuetest.PgBouncerURL(t, direct)

	u, err := url.Parse(pooled)
	if err != nil {
		t.Fatal(err)
	}
	server := mustParse(t, queuetest.PgBouncerServerURL())
	mode := cmp.Or(server.Query().Get("default_query_exec_mode"), queuetest.PgBouncerExecMode)
	if u.Host != server.Host || u.Path != mustParse(t, direct).Path || u.Query().Get("default_query_exec_mode") != mode {
		t.Fatalf("PgBouncerURL(%s) = %s; want the same database at %s with default_query_exec_mode=%s",
			direct, pooled, server.Host, mode)
	}

	cfg, err := pgxpool.ParseConfig(pooled)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := queue.New(pool)

	// Concurrent enqueues, so client connections really share server ones
	// and statements described on one run on another.
	const events = 40
	var wg sync.WaitGroup
	errs := make(chan error, events)
	for i := range events {
		wg.Go(func() {
			inserted, err := queuetest.NewSeed(store).Enqueue(ctx, queue.FailedEvent{Source: "default",
				EventID: fmt.Sprintf("evt_bouncer_%d", i), EventType: "invoice.paid",
				Payload: fmt.Appendf(nil, `{"id":"evt_bouncer_%d"}`, i), Error: "app said 500"})
			if err == nil && !inserted {
				err = fmt.Errorf("event %d: not inserted", i)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("enqueue through PgBouncer: %v", err)
		}
	}
	// Already queued: no second row, through whichever server connection.
	if inserted, err := queuetest.NewSeed(store).Enqueue(ctx, queue.FailedEvent{Source: "default", EventID: "evt_bouncer_0",
		EventType: "invoice.paid", Payload: []byte(`{}`), Error: "again"}); err != nil || inserted {
		t.Fatalf("enqueue of a queued event: inserted %v, %v; want false, nil", inserted, err)
	}

	if _, err := pool.Exec(ctx, `UPDATE webhook_events SET next_retry_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	claimed, err := queuetest.NewSeed(store).ClaimDue(ctx, 25, time.Minute)
	if err != nil || len(claimed) != 25 {
		t.Fatalf("ClaimDue through PgBouncer: %d events, %v; want 25", len(claimed), err)
	}

	st, err := store.Stats(ctx)
	if err != nil {
		t.Fatalf("Stats through PgBouncer: %v", err)
	}
	if st.Failed != events || st.DueNow != events-25 || st.OldestPending == nil {
		t.Errorf("stats = %+v; want %d failed, %d of them still due", st, events, events-25)
	}
}

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// PgBouncerURL fails the test when CI=true and nothing answers, skips it
// otherwise, and says how to start PgBouncer either way.
func TestPgBouncerURL_WithoutPgBouncer(t *testing.T) {
	// t.Setenv: not parallel.
	direct := "postgres://postgres:postgres@127.0.0.1:5432/hookd_test_none?sslmode=disable"
	t.Setenv("TEST_PGBOUNCER_URL", "postgres://postgres:postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2")
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		rec := &recorder{TB: t}
		done := make(chan struct{})
		// Skipf and Fatalf end the goroutine that calls them.
		go func() {
			defer close(done)
			queuetest.PgBouncerURL(rec, direct)
		}()
		<-done
		switch {
		case ci == "" && (!rec.skipped || !strings.Contains(rec.msg, "make pgbouncer")):
			t.Errorf("CI unset: skipped %v, failed %v, %q; want a skip saying to run make pgbouncer", rec.skipped, rec.failed, rec.msg)
		case ci == "true" && (!rec.failed || !strings.Contains(rec.msg, "CI=true") || !strings.Contains(rec.msg, ".ci/pgbouncer.sh")):
			t.Errorf("CI=true: skipped %v, failed %v, %q; want a failure naming .ci/pgbouncer.sh", rec.skipped, rec.failed, rec.msg)
		}
	}
}

// recorder is a testing.TB whose Skipf and Fatalf record what they were
// told instead of ending the test.
type recorder struct {
	testing.TB
	msg             string
	skipped, failed bool
}

func (r *recorder) Helper() {}

func (r *recorder) Skipf(format string, args ...any) {
	r.skipped, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}
