package main

import (
	"encoding/json"
	"testing"
)

// The load is meant to look like Stripe's traffic: events of 1 to 2 KB, each
// with a new id, that parse as JSON.
func TestEventGenMakesDistinctEventsOfOneToTwoKB(t *testing.T) {
	t.Parallel()
	gen := newEventGen("evt_test_")
	seen := map[string]bool{}
	for range 2500 {
		body := gen.next()
		if len(body) < 1024 || len(body) > 2048 {
			t.Fatalf("event of %d bytes, want 1024 to 2048", len(body))
		}
		var ev struct{ ID, Type string }
		if err := json.Unmarshal(body, &ev); err != nil || ev.Type != "invoice.paid" {
			t.Fatalf("not a Stripe event: %v, %s", err, body)
		}
		if seen[ev.ID] {
			t.Fatalf("id %s made twice", ev.ID)
		}
		seen[ev.ID] = true
	}
}
