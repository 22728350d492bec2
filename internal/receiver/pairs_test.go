package receiver_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// deliverUntilAnswered delivers body until it is answered: a delivery
// that finds the other of its pair running is told 503 (ErrEventLocked),
// and Stripe delivers it again.
func deliverUntilAnswered(t *testing.T, r *receiver.Receiver, body []byte, secret string) (receiver.Outcome, error) {
	for {
		got, err := receive(t, r, body, secret)
		if !errors.Is(err, queue.ErrEventLocked) {
			return got, err
		}
	}
}

// The snapshot/thin pair, in both modes and both orders, one after the
// other and at the same moment: with forward-both the app gets both, with
// dedup exactly one (the first), the other answered 200 as its duplicate;
// either way each is linked to the other.
func TestReceive_SnapshotThinPair(t *testing.T) {
	t.Parallel()
	const pairs = 20
	for _, alias := range []receiver.SnapshotAlias{receiver.ForwardBoth, receiver.DedupAlias} {
		for _, order := range []string{"snapshot first", "thin first", "at once, snapshot started first", "at once, thin started first"} {
			t.Run(string(alias)+"/"+order, func(t *testing.T) {
				t.Parallel()
				store, bundle := setup(t)
				a, proc := newApp(t)
				r := receiver.New(store, discardLogger, receiver.Config{
					Endpoints: threeEndpoints(t), Processor: proc, SnapshotAlias: alias})

				forwarded := map[string]int{}
				for range pairs {
					snapID := stripeevent.NewID("evt")
					snapshot := stripeevent.Minimal(snapID, "invoice.paid")
					thin := stripeevent.Thin(stripeevent.NewID("evt"), "invoice.paid", snapID)
					deliveries := []struct {
						body   []byte
						secret string
					}{{snapshot, "whsec_account"}, {thin, "whsec_thin"}}
					if order == "thin first" || order == "at once, thin started first" {
						deliveries[0], deliveries[1] = deliveries[1], deliveries[0]
					}
					outcomes := make([]receiver.Outcome, 2)
					errs := make([]error, 2)
					if order == "snapshot first" || order == "thin first" {
						for i, d := range deliveries {
							outcomes[i], errs[i] = deliverUntilAnswered(t, r, d.body, d.secret)
						}
					} else {
						var start, done sync.WaitGroup
						start.Add(1)
						for i, d := range deliveries {
							done.Go(func() {
								start.Wait()
								outcomes[i], errs[i] = deliverUntilAnswered(t, r, d.body, d.secret)
							})
						}
						start.Done()
						done.Wait()
					}
					for i, err := range errs {
						if err != nil {
							t.Fatalf("delivery %d: %v", i, err)
						}
					}
					if alias == receiver.DedupAlias && (order == "snapshot first" || order == "thin first") &&
						(outcomes[0] != receiver.Processed || outcomes[1] != receiver.Duplicate) {
						t.Fatalf("%s: outcomes %v, want processed then duplicate", order, outcomes)
					}
					forwarded[snapID] = 0
				}

				reqs := a.got()
				want := 2 * pairs
				if alias == receiver.DedupAlias {
					want = pairs
				}
				if len(reqs) != want {
					t.Fatalf("the app got %d requests for %d pairs, want %d", len(reqs), pairs, want)
				}
				if alias == receiver.DedupAlias {
					// One per pair, under the pair's id.
					for _, req := range reqs {
						forwarded[req.header.Get("Hookd-Event-Id")]++
					}
					for id, n := range forwarded {
						if n != 1 {
							t.Errorf("pair %s forwarded %d times, want once", id, n)
						}
					}
				}
				if got := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM event_pairs`); got != pairs {
					t.Errorf("pairs linked: got %d, want %d", got, pairs)
				}
				switch {
				case alias == receiver.ForwardBoth:
					if got := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM event_pairs WHERE forwarded = 'both'`); got != pairs {
						t.Errorf("pairs forwarded both: got %d, want %d", got, pairs)
					}
				case order == "snapshot first":
					if got := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM event_pairs WHERE forwarded = 'snapshot'`); got != pairs {
						t.Errorf("pairs whose snapshot event was forwarded: got %d, want %d", got, pairs)
					}
				case order == "thin first":
					if got := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM event_pairs WHERE forwarded = 'thin'`); got != pairs {
						t.Errorf("pairs whose thin event was forwarded: got %d, want %d", got, pairs)
					}
				}
			})
		}
	}
}

// Each event of a pair finds the pair, so each one's page links to the
// other.
func TestReceive_PairIsLinkedBothWays(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	r := receiver.New(store, discardLogger, receiver.Config{Endpoints: threeEndpoints(t), Processor: &countingProcessor{}})
	snapID, thinID := stripeevent.NewID("evt"), stripeevent.NewID("evt")
	if _, err := receive(t, r, stripeevent.Thin(thinID, "invoice.paid", snapID), "whsec_thin"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{snapID, thinID} {
		p, err := store.PairOf(t.Context(), id)
		if err != nil || p.ThinEventID != thinID || p.SnapshotEventID != snapID || p.Endpoint != "thin" {
			t.Errorf("PairOf(%s) = %+v, %v", id, p, err)
		}
	}
	if _, err := store.PairOf(t.Context(), stripeevent.NewID("evt")); !errors.Is(err, queue.ErrNotFound) {
		t.Errorf("PairOf(an unpaired event) = %v, want ErrNotFound", err)
	}
}
