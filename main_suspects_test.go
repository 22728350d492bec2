package main

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// suspectRunLine is what a replica logs as it starts a suspect's run
// alone (worker.Retrier's suspect runner).
const suspectRunLine = "a suspect runs alone"

// makeSuspects queues ids as events a crash cut short: due, uncharged,
// suspects.
func makeSuspects(t *testing.T, bundle *testBundle, ids []string) {
	t.Helper()
	insertDue(t, bundle.pool, ids)
	if _, err := bundle.pool.Exec(context.Background(), `
		INSERT INTO webhook_suspects (event_id, path, interruptions) SELECT id, 'retry', 1 FROM unnest($1::text[]) AS id`,
		ids); err != nil {
		t.Fatal(err)
	}
}

// Three replicas, and a suspect that kills the replica running it alone:
// the replica holding the suspect slot is killed mid-run, the slot passes
// on to another, which runs the suspect alone again, and the suspect is
// charged that one crash. Once the app answers it, it is cleared.
func TestSuspects_TheSlotPassesOnWhenItsHolderDies(t *testing.T) {
	t.Parallel()
	bundle := setup(t)
	poison := stripeevent.NewID("evt")
	var crash atomic.Bool
	crash.Store(true)
	arrived := make(chan struct{}, 4)
	app := newLeaseApp(t, func(r *http.Request) int {
		if r.Header.Get("Hookd-Event-Id") != poison || !crash.Load() {
			return http.StatusOK
		}
		arrived <- struct{}{}
		<-r.Context().Done()
		return http.StatusInternalServerError
	})
	makeSuspects(t, bundle, []string{poison})
	rig := newCrashRig(t, []string{
		"DATABASE_URL=" + bundle.dbURL,
		"STRIPE_WEBHOOK_SECRET=" + testSecret,
		"HOOKD_FORWARD_URL=" + app.srv.URL,
		"HOOKD_FORWARD_TIMEOUT=30s",
		"HOOKD_RETRY_INTERVAL=100ms",
	})
	procs := []*hookdProcess{rig.start(), rig.start(), rig.start()}
	// runningIt is the replica whose log says it runs the poison alone
	// for the n-th time across the replicas.
	runningIt := func(n int) int {
		holder, seen := -1, 0
		for i, p := range procs {
			for line := range strings.Lines(p.log.String()) {
				if strings.Contains(line, suspectRunLine) && strings.Contains(line, poison) {
					seen++
					holder = i
				}
			}
		}
		if seen != n {
			t.Fatalf("the replicas logged %d runs alone of the poison, want %d", seen, n)
		}
		return holder
	}
	wait := func(what string) {
		select {
		case <-arrived:
		case <-time.After(time.Minute):
			t.Fatalf("%s: the poison never reached the app", what)
		}
	}

	wait("first run alone")
	first := runningIt(1)
	procs[first].kill()
	wait("run alone after the holder died")
	second := runningIt(2)
	if second == first {
		t.Fatalf("the dead replica %d runs the suspect again", first)
	}
	if status, attempts := statusOf(t, bundle, poison); status == string(queue.StatusDead) || attempts != 1 {
		t.Errorf("the poison after its holder died: %s, %d attempts; want charged exactly the one crash", status, attempts)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_suspects WHERE event_id = $1
		AND crashes = 1 AND cleared_at IS NULL`, poison); n != 1 {
		t.Errorf("the poison is not a suspect with one crash charged")
	}
	// The app answers it now: the replica running it alone is not the
	// one that died, and the suspect completes.
	crash.Store(false)
	procs[second].kill()
	queuetest.WaitFor(t, time.Minute, "the poison processed on the third replica", func() bool {
		return queuetest.Count(t, bundle.pool, `SELECT count(*) FROM processed_webhook_events WHERE event_id = $1`, poison) == 1
	})
	third := -1
	for i := range procs {
		if i != first && i != second {
			third = i
		}
	}
	if !strings.Contains(procs[third].log.String(), suspectRunLine) {
		t.Errorf("the third replica never ran the suspect alone")
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_suspects WHERE event_id = $1
		AND crashes = 2 AND cleared_at IS NOT NULL`, poison); n != 1 {
		t.Errorf("the poison is not cleared after two crashes charged")
	}
	if err := procs[third].terminate(); err != nil {
		t.Errorf("hookd after SIGTERM: %v, want a clean exit", err)
	}
}

// What a crash costs: 64 suspects on one replica, the app answering each
// in 300 ms, run one at a time, SuspectsPerSlot to a turn of the suspect
// slot. The time it takes is logged for OPERATIONS.md, not asserted.
func TestSuspects_SixtyFourRunAloneOnOneReplica(t *testing.T) {
	t.Parallel()
	bundle := setup(t)
	ids := newEventIDs(64)
	var inFlight, most atomic.Int32
	app := newLeaseApp(t, func(r *http.Request) int {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		select {
		case <-time.After(300 * time.Millisecond):
		case <-r.Context().Done():
		}
		return http.StatusOK
	})
	makeSuspects(t, bundle, ids)
	rig := newCrashRig(t, []string{
		"DATABASE_URL=" + bundle.dbURL,
		"STRIPE_WEBHOOK_SECRET=" + testSecret,
		"HOOKD_FORWARD_URL=" + app.srv.URL,
	})
	start := time.Now()
	p := rig.start()
	queuetest.WaitFor(t, 5*time.Minute, "the 64 suspects processed", func() bool {
		return queuetest.Count(t, bundle.pool, `SELECT count(*) FROM processed_webhook_events WHERE event_id = ANY ($1)`, ids) == 64
	})
	took := time.Since(start)
	if err := p.terminate(); err != nil {
		t.Errorf("hookd after SIGTERM: %v, want a clean exit", err)
	}
	if m := most.Load(); m != 1 {
		t.Errorf("the app had %d suspects at once, want 1", m)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_suspects WHERE cleared_at IS NOT NULL`); n != 64 {
		t.Errorf("%d suspects cleared, want 64", n)
	}
	t.Logf("64 suspects, app 300 ms, one replica, default settings: all processed %.1f s after hookd started", took.Seconds())
}
