package worker_test

import (
	"testing"

	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
)

// Under a delivery rate a suspect's run alone still starts: its lease
// leaves room for its turn under the rate as well as its run, as a batch's
// do. Three suspects, the rate at 50 a second: each runs alone once and is
// processed, and is cleared.
func TestRetrier_SuspectsRunAloneUnderARate(t *testing.T) {
	t.Parallel()
	const suspects = 3
	b := setup(t)
	ids := make([]string, suspects)
	for i := range ids {
		ids[i] = queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{}).EventID
	}
	if _, err := b.pool.Exec(t.Context(), `
		INSERT INTO webhook_suspects (event_id, path, interruptions) SELECT id, 'retry', 1 FROM unnest($1::text[]) AS id`,
		ids); err != nil {
		t.Fatal(err)
	}
	p := &countingProcessor{}
	r := worker.NewRetrier(b.store, discardLogger, worker.ProducerConfig{Processor: p, Pace: worker.NewPace(50)})
	if n, err := r.RunSuspects(t.Context()); err != nil || n != suspects {
		t.Fatalf("ran %d suspects, %v; want %d", n, err, suspects)
	}
	if runs := p.runs.Load(); runs != suspects {
		t.Errorf("the app got %d runs, want %d", runs, suspects)
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM processed_webhook_events WHERE event_id = ANY ($1)`, ids); n != suspects {
		t.Errorf("%d suspects processed, want %d", n, suspects)
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_suspects WHERE cleared_at IS NOT NULL`); n != suspects {
		t.Errorf("%d suspects cleared, want %d", n, suspects)
	}
}
