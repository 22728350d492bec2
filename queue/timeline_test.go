package queue_test

import (
	"testing"
	"time"

	"github.com/hookd/hookd/queue/queuetest"
)

// The first look keeps the timeline; the same timeline again is no
// failover; a timeline that changed is one, told once and audited once.
func TestNoteTimeline(t *testing.T) {
	t.Parallel()
	s, bundle := setup(t)
	ctx := t.Context()
	for i := range 2 {
		if f, err := s.NoteTimeline(ctx, time.Hour); err != nil || f != nil {
			t.Fatalf("look %d: %+v, %v; want no failover", i+1, f, err)
		}
	}
	// As a promoted standby holds it: the old primary's timeline.
	if _, err := bundle.pool.Exec(ctx, `UPDATE database_timeline SET timeline = timeline - 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := bundle.pool.Exec(ctx, `INSERT INTO processed_webhook_events (event_id) VALUES ('evt_newest')`); err != nil {
		t.Fatal(err)
	}
	f, err := s.NoteTimeline(ctx, time.Hour)
	if err != nil || f == nil || f.To != f.From+1 || f.Newest.IsZero() {
		t.Fatalf("after a promotion: %+v, %v; want a failover to the next timeline with the newest event", f, err)
	}
	if f, err := s.NoteTimeline(ctx, time.Hour); err != nil || f != nil {
		t.Fatalf("the look after: %+v, %v; want no failover", f, err)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM audit_log WHERE action = 'failover'`); n != 1 {
		t.Errorf("failover audit entries: %d, want 1", n)
	}
}
