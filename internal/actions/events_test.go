package actions_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// Paging by cursor lists every event once, in the list's order, even when
// events share their sort time (the id breaks the tie): the dead list and
// a pending one.
func TestListEvents_CursorPagesEveryEventOnce(t *testing.T) {
	t.Parallel()
	pool := queuetest.NewPool(t)
	ctx := context.Background()
	a := actions.New(actions.Stores{Queue: queue.New(pool)})
	for _, status := range []queue.Status{queue.StatusDead, queue.StatusRetrying} {
		for range 7 {
			queuetest.InsertEvent(t, pool, queuetest.EventOpts{Status: status, Attempts: 2})
		}
	}
	// Every event at one creation time and one due time.
	if _, err := pool.Exec(ctx, `UPDATE webhook_events SET created_at = '2026-01-02T03:04:05.123456Z', next_retry_at = '2026-01-02T03:04:05Z'`); err != nil {
		t.Fatal(err)
	}
	for _, status := range []queue.Status{queue.StatusDead, queue.StatusPending} {
		all, err := a.ListEvents(ctx, queue.EventFilter{Status: status, Limit: 100}, "")
		if err != nil {
			t.Fatal(err)
		}
		var paged []string
		cursor := ""
		for pages := 1; ; pages++ {
			page, err := a.ListEvents(ctx, queue.EventFilter{Status: status, Limit: 3}, cursor)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range page.Events {
				paged = append(paged, e.EventID)
			}
			if page.Total != 7 {
				t.Errorf("%s page %d: total %d, want 7", status, pages, page.Total)
			}
			if page.Next == "" {
				break
			}
			if pages > 7 {
				t.Fatalf("%s: more pages than events", status)
			}
			cursor = page.Next
		}
		if len(paged) != len(all.Events) {
			t.Fatalf("%s: paged %d events, the list has %d", status, len(paged), len(all.Events))
		}
		for i, e := range all.Events {
			if paged[i] != e.EventID {
				t.Fatalf("%s: paged %v, want the list's order", status, paged)
			}
		}
	}
	// A cursor of one list is refused by another, as is a made-up one.
	dead, err := a.ListEvents(ctx, queue.EventFilter{Status: queue.StatusDead, Limit: 3}, "")
	if err != nil {
		t.Fatal(err)
	}
	var invalid *actions.InvalidError
	for _, c := range []string{dead.Next, "not a cursor", "e30"} {
		if _, err := a.ListEvents(ctx, queue.EventFilter{Status: queue.StatusPending, Limit: 3}, c); !errors.As(err, &invalid) || invalid.Field != "cursor" {
			t.Errorf("pending list with cursor %q: %v, want a refused cursor", c, err)
		}
	}
}
