package worker_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/worker"
)

// Deliver calls every destination at once: each app here answers only
// once all three have the event, which calls made one after another would
// never see before their timeout. A destination held is not called, and
// says why; one not configured fails.
func TestFanout_DeliverCallsEveryDestinationAtOnce(t *testing.T) {
	var arrived sync.WaitGroup
	arrived.Add(3)
	var dests []worker.FanoutDestination
	for _, name := range []string{"a", "b", "c"} {
		app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if got := r.Header.Get(worker.HeaderDestination); got != name {
				t.Errorf("%s got Hookd-Destination %q", name, got)
			}
			arrived.Done()
			arrived.Wait()
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(app.Close)
		f, err := worker.NewDestinationForwarder(worker.ForwardOptions{Name: name, URL: app.URL})
		if err != nil {
			t.Fatal(err)
		}
		dests = append(dests, worker.FanoutDestination{Name: name, Processor: f, Timeout: 10 * time.Second})
	}
	route := func(worker.Delivery) ([]string, map[string]error) { return []string{"a", "b", "c"}, nil }
	fan := worker.NewFanout(route, append(dests, worker.FanoutDestination{Name: "held", Processor: worker.Discard}))
	fan.HoldBy(func(name string) string {
		if name == "held" {
			return "paused by ana"
		}
		return ""
	})
	d := worker.Delivery{EventID: "evt_1", EventType: "invoice.paid", Payload: []byte(`{"id":"evt_1"}`)}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for i, c := range fan.Deliver(ctx, d, []string{"a", "b", "c", "held", "gone"}) {
		switch {
		case i < 3 && (c.Result.Err != nil || c.Waiting != ""):
			t.Errorf("%s: %+v, want delivered", c.Destination, c)
		case c.Destination == "held" && c.Waiting != "paused by ana":
			t.Errorf("held: %+v, want waiting, paused by ana", c)
		case c.Destination == "gone" && c.Result.Err == nil:
			t.Errorf("gone: %+v, want a failure: no such destination", c)
		}
	}
}
