package maintenance_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker/maintenance"
)

// heldTexts are the alerts about held keys among texts.
func heldTexts(texts []string) []string {
	var held []string
	for _, t := range texts {
		if strings.Contains(t, " held") {
			held = append(held, t)
		}
	}
	return held
}

// holdKey makes a dead event of id hold key of billing, with waiting
// deliveries behind it.
func holdKey(t *testing.T, b *testBundle, id, key string, waiting int) {
	t.Helper()
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: id, Destination: "billing", OrderKey: key,
		Status: queue.StatusDead, Attempts: queue.MaxAttempts})
	for range waiting {
		queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Destination: "billing", OrderKey: key})
	}
}

// A key held by a dead event is announced once, naming its destination,
// the dead event and how many wait behind it; a key held again after its
// event was retried and died again is announced again; the condition
// clears once no key is held.
func TestAlerter_HeldKeyAnnouncedOncePerHold(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hook := newIncomingWebhook(t)
	a := maintenance.NewAlerter(b.store, discardLogger, alerterConfig(hook.srv.URL))
	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "billing"})
	holdKey(t, b, "evt_a1", "cus_a", 2)
	// Run checks at once; its alerts out, only the test's checks follow.
	runAlerter(t, a)
	texts := hook.waitTexts(t, 2) // the death, and the held key
	held := heldTexts(texts)
	if len(held) != 1 {
		t.Fatalf("%d alerts of held keys, want 1: %q", len(held), texts)
	}
	wantContains(t, held[0], "key cus_a of destination billing is held", "evt_a1", "2 deliveries of the key wait",
		"release the key", "https://hooks.example.com/destinations")

	check(t, a)
	holdKey(t, b, "evt_b1", "cus_b", 0)
	check(t, a)
	check(t, a)
	texts = hook.waitTexts(t, 3)
	if held = heldTexts(texts); len(held) != 2 {
		t.Fatalf("%d alerts of held keys, want 2: %q", len(held), texts)
	}
	wantContains(t, held[1], "key cus_b of destination billing", "evt_b1", "0 deliveries")
	if strings.Contains(held[1], "cus_a") {
		t.Errorf("the second alert names cus_a again: %q", held[1])
	}

	// evt_a1 retried, and dead again: its key is held again.
	exec(t, b.pool, `UPDATE webhook_events SET status = 'dead', last_attempt_at = clock_timestamp() WHERE event_id = 'evt_a1'`)
	check(t, a)
	texts = hook.waitTexts(t, 4)
	if held = heldTexts(texts); len(held) != 3 || !strings.Contains(held[2], "key cus_a") {
		t.Fatalf("alerts of held keys %q, want a third naming cus_a", held)
	}

	for _, key := range []string{"cus_a", "cus_b"} {
		if _, err := b.store.ReleaseHeldKey(t.Context(), "billing", key); err != nil {
			t.Fatal(err)
		}
	}
	check(t, a)
	texts = hook.waitTexts(t, 5)
	wantContains(t, texts[len(texts)-1], "cleared", "no key of an ordered destination is held")
	check(t, a)
	if got := len(hook.received()); got != 5 {
		t.Errorf("%d alerts after a check with nothing changed, want 5: %q", got, hook.received())
	}
}

// Three replicas checking at once announce each of twelve newly held keys
// exactly once between them: ten named, two counted.
func TestAlerter_HeldKeysAnnouncedOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hook := newIncomingWebhook(t)
	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "billing"})
	const keys = 12
	for i := range keys {
		holdKey(t, b, fmt.Sprintf("evt_k%02d", i), fmt.Sprintf("cus_%02d", i), 1)
	}
	replicas := make([]*maintenance.Alerter, 3)
	for i := range replicas {
		replicas[i] = maintenance.NewAlerter(b.store, discardLogger, alerterConfig(hook.srv.URL))
		runAlerter(t, replicas[i])
	}
	var wg sync.WaitGroup
	for _, a := range replicas {
		for range 4 {
			wg.Go(func() {
				if err := a.Check(t.Context()); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	texts := hook.waitTexts(t, 2) // the deaths, and the held keys
	held := heldTexts(texts)
	if len(held) != 1 {
		t.Fatalf("%d alerts of held keys, want 1: %q", len(held), texts)
	}
	named := 0
	for i := range keys {
		if strings.Contains(held[0], fmt.Sprintf("key cus_%02d:", i)) {
			named++
		}
	}
	if named != 10 {
		t.Errorf("the alert names %d keys, want 10: %q", named, held[0])
	}
	wantContains(t, held[0], "12 keys of ordered destinations newly held", "12 keys held in all", "and 2 more keys")
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_events WHERE hold_alerted_at IS NOT NULL`); n != keys {
		t.Errorf("%d dead events marked announced, want %d", n, keys)
	}
}
