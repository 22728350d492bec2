package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/queue"
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
	if !strings.Contains(marked["evt_overdue"], "not tried") || !strings.Contains(marked["evt_reclaimed"], "3 tries by the retry loop never came back") ||
		marked["evt_fine"] != "" {
		t.Errorf("stuck marks on the pending list: %q", marked)
	}

	stuck := c.get(href)
	wantStatus(t, stuck, http.StatusOK)
	if n := stuck.doc.Find(`[data-testid="event-row"]`).Length(); n != 2 {
		t.Errorf("the overview's stuck link %s lists %d events, want 2", href, n)
	}
	if got := testid(c.get("/events/"+overdue.ID.String()).doc, "stuck-note"); !strings.HasPrefix(got, "No answer.") {
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

// TestStuck_HeldWhileDeliveryIsPaused: while an operator's pause holds
// delivery, due events wait on purpose: the overview counts none of them
// stuck and the lists and the event's page say they are held, by whom and
// why. Once delivery is resumed, with no retry loop claiming them, the same
// events are stuck again.
func TestStuck_HeldWhileDeliveryIsPaused(t *testing.T) {
	t.Parallel()
	b, _, _ := setupControlled(t)
	ctx := context.Background()
	if err := b.store.RecordRetrierTick(ctx); err != nil {
		t.Fatal(err)
	}
	held := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_held", DueIn: -10 * time.Minute})
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_later", DueIn: time.Hour})

	op := b.client(t)
	op.signIn(accounts.RoleOperator)
	op.follow(op.post("/delivery/pause", url.Values{"reason": {"app deploy #42"}}))

	overview := op.get("/")
	if got := testid(overview.doc, "count-stuck"); got != "0" {
		t.Errorf("overview while paused: %q stuck, want 0", got)
	}
	if overview.doc.Find(`a.stat.stat-bad:has([data-testid="count-stuck"])`).Length() != 0 {
		t.Error("overview while paused: the stuck count is marked bad")
	}
	if got := testid(overview.doc, "stuck-why"); !strings.Contains(got, "delivery is paused") {
		t.Errorf("overview while paused: the stuck count says %q, want that due events are held by the pause", got)
	}
	if got := testid(overview.doc, "due-note"); !strings.Contains(got, "held") {
		t.Errorf("overview while paused: due now says %q, want held", got)
	}

	marks := func() (stuck, heldBy map[string]string) {
		stuck, heldBy = map[string]string{}, map[string]string{}
		op.get("/events?status=pending").doc.Find(`[data-testid="event-row"]`).Each(func(_ int, row *goquery.Selection) {
			id, _ := row.Attr("data-event-id")
			if title, ok := row.Find(`[data-testid="stuck-mark"]`).Attr("title"); ok {
				stuck[id] = title
			}
			if title, ok := row.Find(`[data-testid="held-mark"]`).Attr("title"); ok {
				heldBy[id] = title
			}
		})
		return stuck, heldBy
	}
	stuck, heldBy := marks()
	if len(stuck) != 0 {
		t.Errorf("pending list while paused marks %q stuck", stuck)
	}
	if got := heldBy["evt_held"]; !strings.Contains(got, "operator@example.com") || !strings.Contains(got, "app deploy #42") {
		t.Errorf("pending list while paused: evt_held's held mark says %q, want who paused and why", got)
	}
	if _, ok := heldBy["evt_later"]; ok {
		t.Error("pending list while paused: an event not yet due is marked held")
	}
	stuckList := op.get("/events?status=pending&stuck=1")
	if n := stuckList.doc.Find(`[data-testid="event-row"]`).Length(); n != 0 {
		t.Errorf("the stuck list while paused has %d events, want none", n)
	}
	if got := testid(stuckList.doc, "stuck-filter"); !strings.Contains(got, "while delivery is paused") {
		t.Errorf("the stuck list while paused says %q, want why no event is overdue", got)
	}
	detail := op.get("/events/" + held.ID.String())
	if got := testid(detail.doc, "stuck-note"); got != "" {
		t.Errorf("evt_held's page while paused says %q", got)
	}
	if got := testid(detail.doc, "held-note"); !strings.Contains(got, "app deploy #42") {
		t.Errorf("evt_held's page while paused says held %q, want the pause's reason", got)
	}

	op.follow(op.post("/delivery/resume", nil))
	if got := testid(op.get("/").doc, "count-stuck"); got != "1" {
		t.Errorf("overview after resume with no loop claiming: %q stuck, want 1", got)
	}
	stuck, heldBy = marks()
	if !strings.Contains(stuck["evt_held"], "not tried") || len(heldBy) != 0 {
		t.Errorf("pending list after resume: stuck %q, held %q; want evt_held stuck and nothing held", stuck, heldBy)
	}
	if n := op.get("/events?status=pending&stuck=1").doc.Find(`[data-testid="event-row"]`).Length(); n != 1 {
		t.Errorf("the stuck list after resume has %d events, want 1", n)
	}
	if got := testid(op.get("/events/"+held.ID.String()).doc, "stuck-note"); !strings.HasPrefix(got, "No answer.") {
		t.Errorf("evt_held's page after resume says %q, want it stuck", got)
	}
}
