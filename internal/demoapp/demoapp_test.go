package demoapp_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/demoapp"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/worker"
)

const forwardSecret = "whsec_ZGVtby1hcHAtdGVzdC1rZXk="

// idFor finds an event id whose first delivery gets outcome.
func idFor(t *testing.T, outcome demoapp.Outcome) string {
	t.Helper()
	for i := range 10_000 {
		id := fmt.Sprintf("evt_demo_%d", i)
		if demoapp.Decide(id, "invoice.paid", 1) == outcome {
			return id
		}
	}
	t.Fatalf("no id among 10,000 gets %s", outcome)
	return ""
}

func TestDecide_TellsTheSameStoryEveryTime(t *testing.T) {
	t.Parallel()
	// The rejected type fails the inline attempt and every retry, so it
	// goes dead; the person's Retry after that is taken.
	if demoapp.RejectedDeliveries != queue.MaxAttempts+1 {
		t.Fatalf("RejectedDeliveries = %d, want the inline attempt plus %d retries", demoapp.RejectedDeliveries, queue.MaxAttempts)
	}
	for d := 1; d <= demoapp.RejectedDeliveries; d++ {
		if got := demoapp.Decide("evt_any", demoapp.RejectedType, d); got != demoapp.Reject {
			t.Errorf("delivery %d of %s: %s, want reject", d, demoapp.RejectedType, got)
		}
	}
	if got := demoapp.Decide("evt_any", demoapp.RejectedType, demoapp.RejectedDeliveries+1); got != demoapp.Accept {
		t.Errorf("the Retry after it went dead: %s, want accept", got)
	}

	crash, hang := idFor(t, demoapp.Crash), idFor(t, demoapp.Hang)
	for d := 1; d <= demoapp.CrashedDeliveries+1; d++ {
		want := demoapp.Crash
		if d > demoapp.CrashedDeliveries {
			want = demoapp.Accept
		}
		if got := demoapp.Decide(crash, "invoice.paid", d); got != want {
			t.Errorf("delivery %d of a crashing event: %s, want %s", d, got, want)
		}
	}
	if demoapp.CrashedDeliveries > queue.MaxAttempts {
		t.Errorf("CrashedDeliveries = %d: a crashing event would go dead", demoapp.CrashedDeliveries)
	}
	for d, want := range []demoapp.Outcome{demoapp.Hang, demoapp.Accept} {
		if got := demoapp.Decide(hang, "charge.succeeded", d+1); got != want {
			t.Errorf("delivery %d of a hanging event: %s, want %s", d+1, got, want)
		}
	}
	if got := demoapp.Decide(crash, "hookd.ping", 1); got != demoapp.Accept {
		t.Errorf("hookd.ping: %s, want accept", got)
	}

	// Most events are taken at once, and the mix has every failure.
	counts := map[demoapp.Outcome]int{}
	for i := range 1000 {
		counts[demoapp.Decide(stripeevent.NewID("evt"), stripeevent.Mix(i), 1)]++
	}
	if counts[demoapp.Accept] < 600 || counts[demoapp.Crash] == 0 || counts[demoapp.Hang] == 0 || counts[demoapp.Reject] != 100 {
		t.Errorf("first deliveries of 1,000 mixed events: %v; want most accepted, some of each failure, 100 rejected", counts)
	}
}

// hookd's own forwarder, against the demo app, records what a person then
// reads on the dashboard.
func TestApp_ThroughHookdsForwarder(t *testing.T) {
	t.Parallel()
	app, err := demoapp.New(forwardSecret, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(app)
	t.Cleanup(srv.Close)
	fwd, err := worker.NewForwarder(srv.URL+"/stripe-events", forwardSecret)
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(id, eventType string, timeout time.Duration) worker.Result {
		payload, _, err := stripeevent.Sample(eventType, "demoapp test", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		return fwd.Process(ctx, worker.Delivery{EventID: id, EventType: eventType, Payload: payload})
	}

	if res := deliver(idFor(t, demoapp.Accept), "invoice.paid", 10*time.Second); res.Err != nil || res.HTTPStatus != 200 {
		t.Errorf("accepted event: %d, %v; want 200", res.HTTPStatus, res.Err)
	}
	crash := idFor(t, demoapp.Crash)
	if res := deliver(crash, "invoice.paid", 10*time.Second); res.HTTPStatus != 500 ||
		res.Err == nil || !strings.Contains(res.Err.Error(), "connect ECONNREFUSED 127.0.0.1:6379") {
		t.Errorf("crashing event: %d, %v; want 500 naming the framework's error", res.HTTPStatus, res.Err)
	}
	for d := 2; d <= demoapp.CrashedDeliveries; d++ {
		if res := deliver(crash, "invoice.paid", 10*time.Second); res.HTTPStatus != 500 {
			t.Errorf("crashing event, delivery %d: %d, want 500", d, res.HTTPStatus)
		}
	}
	if res := deliver(crash, "invoice.paid", 10*time.Second); res.HTTPStatus != 200 {
		t.Errorf("crashing event, delivery %d: %d, want 200", demoapp.CrashedDeliveries+1, res.HTTPStatus)
	}
	if res := deliver(idFor(t, demoapp.Hang), "invoice.paid", 300*time.Millisecond); res.Err == nil ||
		!strings.Contains(res.Err.Error(), "no answer from downstream") {
		t.Errorf("hanging event: %d, %v; want no answer in time", res.HTTPStatus, res.Err)
	}
	if res := deliver("evt_sub", demoapp.RejectedType, 10*time.Second); res.HTTPStatus != 422 ||
		res.Err == nil || !strings.Contains(res.Err.Error(), "Unknown price price_") {
		t.Errorf("rejected type: %d, %v; want 422 with the validation error", res.HTTPStatus, res.Err)
	}

	// A delivery signed with another key is refused, unsigned too.
	other, err := worker.NewForwarder(srv.URL+"/stripe-events", "whsec_b3RoZXIta2V5")
	if err != nil {
		t.Fatal(err)
	}
	unsigned, err := worker.NewForwarder(srv.URL+"/stripe-events", "")
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]*worker.Forwarder{"other key": other, "unsigned": unsigned} {
		res := f.Process(t.Context(), worker.Delivery{EventID: "evt_forged", EventType: "invoice.paid", Payload: []byte(`{}`)})
		if res.HTTPStatus != http.StatusUnauthorized {
			t.Errorf("%s: %d, %v; want 401", name, res.HTTPStatus, res.Err)
		}
	}

	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	status, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(status), "4 events seen") {
		t.Errorf("GET / = %q, want it to count the 4 events", status)
	}
}
