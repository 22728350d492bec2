package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/receiver"
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
	// for the n-th time across the replicas. A replica's log reaches the
	// test through a pipe, so the line it wrote before its call may come
	// after the app has the call: it is waited for.
	runningIt := func(n int) int {
		holder, seen := -1, 0
		queuetest.WaitFor(t, time.Minute, fmt.Sprintf("%d runs alone of the poison in the logs", n), func() bool {
			holder, seen = -1, 0
			for i, p := range procs {
				for line := range strings.Lines(p.log.String()) {
					if strings.Contains(line, suspectRunLine) && strings.Contains(line, poison) {
						seen++
						holder = i
					}
				}
			}
			return seen >= n
		})
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

// While one replica runs suspects alone, the other replicas keep answering
// Stripe and delivering inline. Eight suspects wait and three replicas run,
// each forwarding to a path of its own, so the app knows which one calls.
// The app answers each suspect 300 ms after it arrives, and not before the
// test has delivered a round beside it: 10 fresh signed deliveries to each
// of the other two replicas, and 5 to the one running the suspect. Every
// delivery of the 8 rounds is answered 200. Those to the other two are
// processed inline, each reaching the app once, from the replica it was
// delivered to, before its answer; those to the replica running the
// suspect are queued unprocessed and delivered once by the retry loop
// afterwards. No replica ever has another event in the app while its
// suspect is there.
func TestSuspects_OtherReplicasDeliverWhileOneRunsSuspects(t *testing.T) {
	t.Parallel()
	// A round beside each suspect: the slot passes on after
	// worker.SuspectsPerSlot of them.
	const suspects, rounds, toOthers, toHolder = 8, 8, 10, 5
	bundle := setup(t)
	ids := newEventIDs(suspects)
	app := newReplicaApp(t, ids, 300*time.Millisecond)
	makeSuspects(t, bundle, ids)
	bin := buildHookdBinary(t)
	procs := make([]*hookdProcess, 3)
	for i := range procs {
		procs[i] = startHookdProcess(t, bin, []string{
			"DATABASE_URL=" + bundle.dbURL,
			"STRIPE_WEBHOOK_SECRET=" + testSecret,
			"HOOKD_FORWARD_URL=" + app.srv.URL + "/r" + strconv.Itoa(i),
		})
	}
	t.Cleanup(func() {
		for i, p := range procs {
			select {
			case <-p.done:
			default:
				p.kill()
			}
			if t.Failed() {
				t.Logf("hookd replica %d:\n%s", i, p.log)
			}
		}
	})

	client := &http.Client{Timeout: 40 * time.Second}
	defer client.CloseIdleConnections()
	var inline, deferred []*stripeSender
	inlineVia := map[string]int{}
	var holders []int
	for round := range rounds {
		var holder int
		select {
		case holder = <-app.running:
		case <-time.After(time.Minute):
			t.Fatalf("round %d: no suspect reached the app", round+1)
		}
		holders = append(holders, holder)
		var senders []*stripeSender
		var to []int
		for i := range procs {
			n := toOthers
			if i == holder {
				n = toHolder
			}
			for range n {
				id := stripeevent.NewID("evt")
				senders = append(senders, &stripeSender{id: id, payload: stripeevent.Minimal(id, "invoice.paid")})
				to = append(to, i)
			}
		}
		var wg sync.WaitGroup
		for i, s := range senders {
			wg.Go(func() { s.deliver(client, procs[to[i]].base, time.Now().Add(30*time.Second), 200*time.Millisecond) })
		}
		wg.Wait()
		for i, s := range senders {
			if to[i] == holder {
				deferred = append(deferred, s)
			} else {
				inline = append(inline, s)
				inlineVia[s.id] = to[i]
			}
		}
		app.proceed <- struct{}{}
	}

	all := append(append([]string(nil), ids...), idsOf(inline)...)
	all = append(all, idsOf(deferred)...)
	queuetest.WaitFor(t, 2*time.Minute, "the suspects and every delivery processed", func() bool {
		return queuetest.Count(t, bundle.pool, `SELECT count(*) FROM processed_webhook_events WHERE event_id = ANY ($1)`,
			all) == int64(len(all))
	})
	for i, p := range procs {
		if err := p.terminate(); err != nil {
			t.Errorf("replica %d after SIGTERM: %v, want a clean exit", i, err)
		}
	}

	calls := app.calls()
	for _, s := range inline {
		if s.answered.IsZero() || s.body != receiver.Processed.String() || s.posts != 1 {
			t.Errorf("%s to a replica running no suspect: %d posts, answers %v, last %q (%v); want one, answered %q",
				s.id, s.posts, s.statuses, s.body, s.err, receiver.Processed)
			continue
		}
		if got := calls[s.id]; len(got) != 1 || got[0].replica != inlineVia[s.id] || got[0].at.After(s.answered) {
			t.Errorf("%s reached the app %v; want once, from replica %d, before its answer at %s", s.id, got, inlineVia[s.id],
				s.answered.Format(time.StampMilli))
		}
	}
	for _, s := range deferred {
		if s.answered.IsZero() || s.body != receiver.Deferred.String() || s.posts != 1 {
			t.Errorf("%s to the replica running a suspect: %d posts, answers %v, last %q (%v); want one, answered %q",
				s.id, s.posts, s.statuses, s.body, s.err, receiver.Deferred)
			continue
		}
		if got := calls[s.id]; len(got) != 1 || !got[0].at.After(s.answered) {
			t.Errorf("%s reached the app %v; want once, by the retry loop after its answer", s.id, got)
		}
	}
	if len(inline) != rounds*2*toOthers || len(deferred) != rounds*toHolder {
		t.Errorf("%d deliveries to replicas running no suspect and %d to one running a suspect, want %d and %d",
			len(inline), len(deferred), rounds*2*toOthers, rounds*toHolder)
	}
	for _, id := range ids {
		if got := calls[id]; len(got) != 1 {
			t.Errorf("suspect %s reached the app %v, want once", id, got)
		}
	}
	if n := app.besideSuspect.Load(); n != 0 {
		t.Errorf("%d events reached the app from a replica while its suspect was there, want none", n)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_suspects WHERE cleared_at IS NOT NULL`); n != suspects {
		t.Errorf("%d suspects cleared, want %d", n, suspects)
	}
	t.Logf("the replica running a suspect in each round: %v", holders)
}

// replicaApp is the app of several replicas, each forwarding to /r<i>: it
// answers events at once but suspects, each of which it answers once it has
// been in the app for latency and the test has sent on proceed, saying on
// running which replica runs it as it arrives.
type replicaApp struct {
	srv           *httptest.Server
	running       chan int
	proceed       chan struct{}
	besideSuspect atomic.Int32

	mu       sync.Mutex
	arrivals map[string][]replicaCall
	alone    map[int]bool
}

// replicaCall is one request in the app: when, and from which replica.
type replicaCall struct {
	replica int
	at      time.Time
}

func (c replicaCall) String() string {
	return fmt.Sprintf("replica %d at %s", c.replica, c.at.Format(time.StampMilli))
}

func newReplicaApp(t *testing.T, suspects []string, latency time.Duration) *replicaApp {
	app := &replicaApp{running: make(chan int, len(suspects)), proceed: make(chan struct{}, len(suspects)),
		arrivals: map[string][]replicaCall{}, alone: map[int]bool{}}
	app.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Hookd-Event-Id")
		replica, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/r"))
		if err != nil {
			t.Errorf("a call to %s: %v", r.URL.Path, err)
		}
		_, _ = io.Copy(io.Discard, r.Body)
		suspect := slices.Contains(suspects, id)
		app.mu.Lock()
		app.arrivals[id] = append(app.arrivals[id], replicaCall{replica: replica, at: time.Now()})
		if app.alone[replica] {
			app.besideSuspect.Add(1)
		}
		if suspect {
			app.alone[replica] = true
		}
		app.mu.Unlock()
		if suspect {
			app.running <- replica
			answer := time.After(latency)
			select {
			case <-app.proceed:
			case <-r.Context().Done():
			}
			select {
			case <-answer:
			case <-r.Context().Done():
			}
			app.mu.Lock()
			app.alone[replica] = false
			app.mu.Unlock()
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(app.srv.Close)
	return app
}

// calls returns the requests each event id brought to the app.
func (app *replicaApp) calls() map[string][]replicaCall {
	app.mu.Lock()
	defer app.mu.Unlock()
	out := make(map[string][]replicaCall, len(app.arrivals))
	for id, c := range app.arrivals {
		out[id] = slices.Clone(c)
	}
	return out
}

func idsOf(senders []*stripeSender) []string {
	ids := make([]string, len(senders))
	for i, s := range senders {
		ids[i] = s.id
	}
	return ids
}
