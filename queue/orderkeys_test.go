package queue_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// Many deliveries of one key take their turn at once: exactly one gets
// the key, each gets a place of its own, and none is granted while a
// delivery refused its turn has not written its queue row.
func TestTakeOrderTurn_OneHolderPerKey(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := t.Context()
	const n = 16
	turns := make([]queue.OrderTurn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { turns[i], errs[i] = s.TakeOrderTurn(ctx, "billing", "cus_1", time.Minute) })
	}
	wg.Wait()
	var holder queue.OrderTurn
	var refused []queue.OrderTurn
	seqs := map[int64]bool{}
	for i, tr := range turns {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		seqs[tr.Seq] = true
		if tr.Granted {
			holder = tr
		} else {
			refused = append(refused, tr)
		}
	}
	if len(refused) != n-1 || len(seqs) != n {
		t.Fatalf("%d of %d turns refused with %d places, want one granted and %d places", len(refused), n, len(seqs), n)
	}
	for _, tr := range refused {
		if tr.Seq < holder.Seq {
			t.Errorf("a refused turn has place %d, before the holder's %d", tr.Seq, holder.Seq)
		}
	}

	if other, err := s.TakeOrderTurn(ctx, "billing", "cus_2", time.Minute); err != nil || !other.Granted {
		t.Fatalf("another key's turn: %+v, %v; want granted", other, err)
	}
	if other, err := s.TakeOrderTurn(ctx, "crm", "cus_1", time.Minute); err != nil || !other.Granted {
		t.Fatalf("the key at another destination: %+v, %v; want granted", other, err)
	}

	if err := s.GiveBackOrderTurns(ctx, []queue.OrderTurn{holder}); err != nil {
		t.Fatal(err)
	}
	if next, err := s.TakeOrderTurn(ctx, "billing", "cus_1", time.Minute); err != nil || next.Granted {
		t.Fatalf("a turn while %d refused ones have not written their rows: %+v, %v; want refused", len(refused), next, err)
	} else {
		refused = append(refused, next)
	}
	if err := s.GiveBackOrderTurns(ctx, refused); err != nil {
		t.Fatal(err)
	}
	if next, err := s.TakeOrderTurn(ctx, "billing", "cus_1", time.Minute); err != nil || !next.Granted {
		t.Fatalf("a turn once every waiter is written: %+v, %v; want granted", next, err)
	}
}

// The retry loop of an ordered destination claims each key's head alone;
// a head waiting out its backoff, or dead, holds the rest of its key and
// no other; releasing a held key lets it go on.
func TestClaimOrderedDeliveries_HeadsOnly(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	queueOrdered(t, s, "evt_a1", "cus_a", true)
	queueOrdered(t, s, "evt_a2", "cus_a", false)
	queueOrdered(t, s, "evt_b1", "cus_b", true)
	queueOrdered(t, s, "evt_a3", "cus_a", false)

	claim := func() []string {
		t.Helper()
		a, err := s.ClaimOrderedDeliveries(ctx, "billing", 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range a.Claimed {
			ids = append(ids, c.Event.EventID)
			if _, err := s.SettleAttempts(ctx, []queue.Settled{{Claimed: c, Kind: queue.SettleFailed,
				Attempt: &queue.NewAttempt{Source: queue.SourceStripe, EventID: c.Event.EventID, Destination: "billing",
					Path: queue.PathRetry, Number: c.Event.Attempts, Error: "HTTP 500"}}}); err != nil {
				t.Fatal(err)
			}
		}
		slices.Sort(ids)
		return ids
	}
	if got := claim(); !slices.Equal(got, []string{"evt_a1", "evt_b1"}) {
		t.Fatalf("claimed %v, want each key's head: [evt_a1 evt_b1]", got)
	}
	if got := claim(); len(got) != 0 {
		t.Fatalf("claimed %v while the heads wait out their backoff, want none", got)
	}

	// evt_b1 goes through; evt_a1 dies.
	if _, err := bundle.pool.Exec(ctx, `DELETE FROM webhook_events WHERE event_id = 'evt_b1'`); err != nil {
		t.Fatal(err)
	}
	if _, err := bundle.pool.Exec(ctx, `UPDATE webhook_events SET status = 'dead' WHERE event_id = 'evt_a1'`); err != nil {
		t.Fatal(err)
	}
	if got := claim(); len(got) != 0 {
		t.Fatalf("claimed %v behind a dead head, want none", got)
	}
	held, err := s.HeldKeys(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 1 || held[0].Key != "cus_a" || held[0].EventID != "evt_a1" || held[0].Waiting != 2 {
		t.Fatalf("held keys %+v, want cus_a held by evt_a1 with 2 waiting", held)
	}
	if ids, err := s.ReleaseHeldKey(ctx, "billing", "cus_a"); err != nil || !slices.Equal(ids, []string{"evt_a1"}) {
		t.Fatalf("release: %v, %v", ids, err)
	}
	if got := claim(); !slices.Equal(got, []string{"evt_a2"}) {
		t.Fatalf("claimed %v once the key was released, want its next: [evt_a2]", got)
	}
	if held, err := s.HeldKeys(ctx, "billing"); err != nil || len(held) != 0 {
		t.Fatalf("held keys after the release: %+v, %v", held, err)
	}
}

// A key's head is not claimed while an inline call holds the key's lease
// (a row of the key queued after the call was granted waits for it), and
// a claimed head, in flight, keeps the inline path off its key.
func TestClaimOrderedDeliveries_NotWhileAnInlineCallHoldsTheKey(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := t.Context()
	inline, err := s.TakeOrderTurn(ctx, "billing", "cus_b", time.Minute)
	if err != nil || !inline.Granted {
		t.Fatalf("the inline call's turn: %+v, %v; want granted", inline, err)
	}
	queueOrdered(t, s, "evt_b2", "cus_b", false)
	queueOrdered(t, s, "evt_a1", "cus_a", true)
	if got := claimIDs(t, s.ClaimOrderedDeliveries); !slices.Equal(got, []string{"evt_a1"}) {
		t.Fatalf("claimed %v while an inline call holds cus_b, want [evt_a1]", got)
	}
	if tr, err := s.TakeOrderTurn(ctx, "billing", "cus_a", time.Minute); err != nil || tr.Granted {
		t.Fatalf("an inline turn while cus_a's head is in flight: %+v, %v; want refused", tr, err)
	} else if err := s.GiveBackOrderTurns(ctx, []queue.OrderTurn{tr}); err != nil {
		t.Fatal(err)
	}
	if err := s.GiveBackOrderTurns(ctx, []queue.OrderTurn{inline}); err != nil {
		t.Fatal(err)
	}
	if got := claimIDs(t, s.ClaimOrderedDeliveries); !slices.Equal(got, []string{"evt_b2"}) {
		t.Fatalf("claimed %v once the inline call gave cus_b back, want [evt_b2]", got)
	}
}

// A delivery without a key, to an ordered destination, is claimed as an
// unordered destination's is, by ClaimOrderedDeliveries; ClaimOrderedHeads
// claims the keys' heads alone.
func TestClaimOrderedHeads_LeavesDeliveriesWithoutAKey(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	queueOrdered(t, s, "evt_a1", "cus_a", true)
	queueOrdered(t, s, "evt_a2", "cus_a", false)
	queueOrdered(t, s, "evt_nokey", "", false)
	if got := claimIDs(t, s.ClaimOrderedHeads); !slices.Equal(got, []string{"evt_a1"}) {
		t.Fatalf("ClaimOrderedHeads claimed %v, want the head alone: [evt_a1]", got)
	}
	if got := claimIDs(t, s.ClaimOrderedDeliveries); !slices.Equal(got, []string{"evt_nokey"}) {
		t.Fatalf("ClaimOrderedDeliveries claimed %v while evt_a1 is in flight, want [evt_nokey]", got)
	}
}

// queueOrdered delivers event id of key to the ordered destination
// billing as the receiver does: it takes the event's lease and the key's
// turn, and settles the delivery on the queue, due at once; granted says
// which the turn must be. An event without a key ("") takes no turn.
func queueOrdered(t *testing.T, s *queue.Store, id, key string, granted bool) {
	t.Helper()
	ctx := t.Context()
	leased, err := s.TakeDeliveries(ctx, queue.SourceStripe, []queue.Delivery{{EventID: id, Path: queue.PathInline}}, time.Minute)
	if err != nil || leased.States[0] != queue.DeliveryNew {
		t.Fatalf("lease %s: %v, %v", id, leased.States, err)
	}
	fe := queue.FailedEvent{Source: queue.SourceStripe, EventID: id, EventType: "invoice.paid", Payload: []byte(`{}`),
		Error: "HTTP 500", Destination: "billing"}
	var turns []queue.OrderTurn
	if key != "" {
		turn, err := s.TakeOrderTurn(ctx, "billing", key, time.Minute)
		if err != nil || turn.Granted != granted {
			t.Fatalf("the turn of %s: %+v, %v; want granted %v", id, turn, err, granted)
		}
		fe.OrderKey, fe.OrderSeq, turns = key, turn.Seq, []queue.OrderTurn{turn}
	}
	written, err := s.SettleDeliveries(ctx, []queue.Received{{EventID: id, Owner: leased.Owner,
		Fanout: &queue.Fanout{Queue: []queue.FailedEvent{fe}, Turns: turns}}})
	if err != nil || !written[0] {
		t.Fatalf("settle %s: %v, %v", id, written, err)
	}
}

// claimIDs claims up to 10 deliveries to billing with claim and returns
// the claimed events' ids.
func claimIDs(t *testing.T, claim func(context.Context, string, int, time.Duration) (queue.Attempts, error)) []string {
	t.Helper()
	a, err := claim(t.Context(), "billing", 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range a.Claimed {
		ids = append(ids, c.Event.EventID)
	}
	return ids
}

// The receiver takes its deliveries' turns with their leases, in one
// transaction: of two events of one key in a batch, the first gets the
// key and the second waits; an event whose lease the batch did not take
// takes no turn.
func TestTakeDeliveries_TakesTurnsWithTheLeases(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := t.Context()
	billing := func(key string) []queue.OrderKey { return []queue.OrderKey{{Destination: "billing", Key: key}} }
	held, err := s.TakeDeliveries(ctx, queue.SourceStripe, []queue.Delivery{{EventID: "evt_held", Path: queue.PathInline}}, time.Minute)
	if err != nil || held.States[0] != queue.DeliveryNew {
		t.Fatalf("lease evt_held: %v, %v", held.States, err)
	}
	got, err := s.TakeDeliveries(ctx, queue.SourceStripe, []queue.Delivery{
		{EventID: "evt_1", Path: queue.PathInline, Runs: true, Turns: billing("cus_a")},
		{EventID: "evt_2", Path: queue.PathInline, Runs: true, Turns: billing("cus_a")},
		{EventID: "evt_3", Path: queue.PathInline, Runs: true, Turns: billing("cus_b")},
		{EventID: "evt_held", Path: queue.PathInline, Runs: true, Turns: billing("cus_c")},
	}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got.States[3] != queue.DeliveryBusy || got.Turns[3] != nil {
		t.Fatalf("evt_held: state %v, turns %+v; want busy, with none", got.States[3], got.Turns[3])
	}
	for i, want := range []bool{true, false, true} {
		ts := got.Turns[i]
		if got.States[i] != queue.DeliveryNew || len(ts) != 1 || ts[0].Granted != want || ts[0].Owner != got.Owner {
			t.Fatalf("delivery %d: state %v, turns %+v; want new, granted %v", i, got.States[i], ts, want)
		}
	}
	if got.Turns[1][0].Seq < got.Turns[0][0].Seq {
		t.Errorf("the second event of cus_a has place %d, before the first's %d", got.Turns[1][0].Seq, got.Turns[0][0].Seq)
	}
	if c, err := s.TakeOrderTurn(ctx, "billing", "cus_c", time.Minute); err != nil || !c.Granted {
		t.Fatalf("cus_c, whose event's lease the batch did not take: %+v, %v; want free", c, err)
	}
}

// A delivery queued behind its key's earlier one waits for its turn, not
// for a backoff: its row is due at once, and the claim takes it as soon
// as it is its key's head.
func TestSettleDeliveries_InTurnIsDueAtOnce(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	leased, err := s.TakeDeliveries(ctx, queue.SourceStripe, []queue.Delivery{{EventID: "evt_behind", Path: queue.PathInline}}, time.Minute)
	if err != nil || leased.States[0] != queue.DeliveryNew {
		t.Fatalf("lease: %v, %v", leased.States, err)
	}
	fe := queue.FailedEvent{Source: queue.SourceStripe, EventID: "evt_behind", EventType: "invoice.paid", Payload: []byte(`{}`),
		Error: "ordered: waits", Destination: "billing", OrderKey: "cus_1", OrderSeq: 7, InTurn: true}
	failed := fe
	failed.EventID, failed.Destination, failed.InTurn, failed.OrderKey, failed.OrderSeq = "evt_behind", "crm", false, "", 0
	if _, err := s.SettleDeliveries(ctx, []queue.Received{{EventID: "evt_behind", Owner: leased.Owner, Wait: time.Hour,
		Fanout: &queue.Fanout{Queue: []queue.FailedEvent{fe, failed}}}}); err != nil {
		t.Fatal(err)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events
		WHERE destination = 'billing' AND next_retry_at <= now() AND order_key = 'cus_1' AND order_seq = 7`); n != 1 {
		t.Errorf("the delivery in its key's turn is not due at once with its place")
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events
		WHERE destination = 'crm' AND next_retry_at > now() + interval '50 minutes'`); n != 1 {
		t.Errorf("the failed delivery beside it does not wait out its backoff")
	}
}
