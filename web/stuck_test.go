package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/accounts"
	"github.com/hookd/hookd/queue/queuetest"
)

func TestStuck_CountedOnTheOverviewAndMarkedOnTheLists(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if err := b.store.RecordRetrierTick(ctx); err != nil {
		t.Fatal(err)
	}
	overdue := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_overdue", DueIn: -10 * time.Minute})
	reclaimed := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_reclaimed", DueIn: time.Minute})
	if _, err := b.pool.Exec(ctx, `UPDATE webhook_events SET claims = 3 WHERE id = $1`, reclaimed.ID); err != nil {
		t.Fatal(err)
	}
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_fine", DueIn: time.Hour})

	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	overview := c.get("/")
	if got := testid(overview.doc, "count-stuck"); got != "2" {
		t.Errorf("overview: %q stuck, want 2", got)
	}
	href, _ := overview.doc.Find(`a.stat:has([data-testid="count-stuck"])`).Attr("href")

	list := c.get("/events?status=pending")
	marked := map[string]string{}
	list.doc.Find(`[data-testid="event-row"]`).Each(func(_ int, row *goquery.Selection) {
		id, _ := row.Attr("data-event-id")
		title, _ := row.Find(`[data-testid="stuck-mark"]`).Attr("title")
		marked[id] = title
	})
	if !strings.Contains(marked["evt_overdue"], "not claimed") || !strings.Contains(marked["evt_reclaimed"], "Claimed 3 times") ||
		marked["evt_fine"] != "" {
		t.Errorf("stuck marks on the pending list: %q", marked)
	}

	stuck := c.get(href)
	wantStatus(t, stuck, http.StatusOK)
	if n := stuck.doc.Find(`[data-testid="event-row"]`).Length(); n != 2 {
		t.Errorf("the overview's stuck link %s lists %d events, want 2", href, n)
	}
	if got := testid(c.get("/events/"+overdue.ID.String()).doc, "stuck-note"); !strings.HasPrefix(got, "Stuck.") {
		t.Errorf("the overdue event's detail page says %q, want it stuck", got)
	}
}

func TestStalledBanner_OnEveryPageWhileTheRetryLoopIsStalled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	pages := []string{"/", "/events?status=dead", "/events?status=pending", "/failures", "/rejections", "/search", "/audit"}
	banner := func() map[string]string {
		got := map[string]string{}
		for _, path := range pages {
			r := c.get(path)
			wantStatus(t, r, http.StatusOK)
			got[path] = testid(r.doc, "stalled-banner")
		}
		return got
	}

	for path, text := range banner() {
		if text != "" {
			t.Errorf("%s: banner %q with nothing pending and no loop yet", path, text)
		}
	}
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusFailed})
	for path, text := range banner() {
		if !strings.Contains(text, "No retry loop has ever run") {
			t.Errorf("%s: banner %q, want that no retry loop ran while events wait", path, text)
		}
	}
	if err := b.store.RecordRetrierTick(ctx); err != nil {
		t.Fatal(err)
	}
	for path, text := range banner() {
		if text != "" {
			t.Errorf("%s: banner %q right after the loop ticked", path, text)
		}
	}
	if _, err := b.pool.Exec(ctx, `UPDATE worker_status SET last_run_at = now() - interval '10 minutes' WHERE component = 'retrier'`); err != nil {
		t.Fatal(err)
	}
	for path, text := range banner() {
		if !strings.Contains(text, "The retry loop has not looked for due events for 10 min") {
			t.Errorf("%s: banner %q, want the stalled loop", path, text)
		}
	}
}
