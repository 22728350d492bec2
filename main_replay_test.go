package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// replayCounter is the app a replay delivers to: it counts each event's
// requests carrying Hookd-Replay, and the others.
type replayCounter struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    map[string]int
	header map[string]bool
	other  int
}

func newReplayCounter(t *testing.T, name string) *replayCounter {
	a := &replayCounter{got: map[string]int{}, header: map[string]bool{}}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		a.mu.Lock()
		defer a.mu.Unlock()
		if r.Header.Get("Hookd-Replay") != name {
			a.other++
			return
		}
		a.got[r.Header.Get("Hookd-Event-Id")]++
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// counts returns how many events the app got, how many of them more than
// once, and its requests without the replay's header.
func (a *replayCounter) counts() (events, twice, other int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, k := range a.got {
		if k > 1 {
			twice++
		}
	}
	return len(a.got), twice, a.other
}

// TestReplay_SurvivesARestartOfTheBinary: a replay of 10,000 processed
// events goes on where it was after the real binary stops midway. Stopped
// cleanly (SIGTERM), the deliveries in flight finish and are recorded, so
// after the restart nothing is delivered twice. SIGKILLed, the deliveries
// in flight whose outcome was not written yet are delivered again once
// their leases expire: at most one batch's worth, never one event at once.
func TestReplay_SurvivesARestartOfTheBinary(t *testing.T) {
	t.Parallel()
	const n, name = 10000, "app bug #123 fix"
	bin := buildHookdBinary(t)
	bundle := setup(t)
	events := make([]queuetest.LoggedOpts, n)
	for i := range events {
		events[i] = queuetest.LoggedOpts{EventID: fmt.Sprintf("evt_restart_%05d", i)}
	}
	queuetest.InsertLogged(t, bundle.pool, events)
	store := queue.New(bundle.pool)
	r, err := store.StartReplay(t.Context(), name, queue.ReplayFilter{From: time.Now().Add(-time.Hour),
		To: time.Now().Add(time.Hour), Processed: true}, "ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	app := newReplayCounter(t, name)
	env := []string{"DATABASE_URL=" + bundle.dbURL, "STRIPE_WEBHOOK_SECRET=" + testSecret,
		"HOOKD_FORWARD_URL=" + app.srv.URL, "HOOKD_FORWARD_RATE=400", "HOOKD_FORWARD_TIMEOUT=2s"}
	progress := func() queue.Replay {
		r, err := store.Replay(context.Background(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	// A clean stop midway: nothing twice, and the replay's count is the
	// app's.
	p := startHookdProcess(t, bin, env)
	queuetest.WaitFor(t, 3*time.Minute, "a third of the replay", func() bool { return progress().Delivered >= n/3 })
	if err := p.terminate(); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, p.log)
	}
	atStop := progress()
	got, twice, other := app.counts()
	if twice != 0 || other != 0 || int64(got) != atStop.Delivered || atStop.State != queue.ReplayRunning {
		t.Fatalf("after SIGTERM: the app got %d events (%d twice, %d without the header), the replay says %d delivered, %s",
			got, twice, other, atStop.Delivered, atStop.State)
	}
	if leases := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_leases`); leases != 0 {
		t.Fatalf("%d leases left after a clean stop", leases)
	}

	// It goes on where it was, then a SIGKILL midway.
	p = startHookdProcess(t, bin, env)
	queuetest.WaitFor(t, 3*time.Minute, "two thirds of the replay", func() bool { return progress().Delivered >= 2*n/3 })
	twiceBefore := func() int { _, tw, _ := app.counts(); return tw }()
	if twiceBefore != 0 {
		t.Fatalf("%d events delivered twice after a clean restart", twiceBefore)
	}
	p.kill()
	atKill := progress()
	gotAtKill, _, _ := app.counts()
	// Delivered to the app, their outcome not written: at most a batch.
	inFlight := int64(gotAtKill) - atKill.Delivered

	p = startHookdProcess(t, bin, env)
	queuetest.WaitFor(t, 4*time.Minute, "the replay to end", func() bool { return progress().State != queue.ReplayRunning })
	if err := p.terminate(); err != nil {
		t.Errorf("SIGTERM: %v\n%s", err, p.log)
	}
	end := progress()
	got, twice, other = app.counts()
	if end.State != queue.ReplayDone || end.Delivered != n || got != n || other != 0 {
		t.Fatalf("the replay ended %s with %d delivered; the app got %d events, %d requests without the header",
			end.State, end.Delivered, got, other)
	}
	if int64(twice) > inFlight {
		t.Fatalf("%d events delivered twice, more than the %d in flight at the SIGKILL", twice, inFlight)
	}
	t.Logf("SIGTERM at %d delivered: none twice; SIGKILL at %d delivered with %d in flight unrecorded: %d delivered again; all %d delivered",
		atStop.Delivered, atKill.Delivered, inFlight, twice, n)
}
