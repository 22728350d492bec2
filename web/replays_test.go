package web_test

import (
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/views"
	"github.com/hookd/hookd/worker"
)

// TestReplays_PreviewStartCancelAndTheEventsPage: an operator previews a
// filter (the count, the events it must skip, a sample), names and starts
// the replay, and cancels it, each audited; a viewer sees the replays but
// may do none of it; the event's page lists the replay.
func TestReplays_PreviewStartCancelAndTheEventsPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	queuetest.InsertLogged(t, b.pool, []queuetest.LoggedOpts{
		{EventID: "evt_paid_1", ObjectID: "in_1", Customer: "cus_1"},
		{EventID: "evt_paid_2", ObjectID: "in_2", Customer: "cus_1"},
		{EventID: "evt_paid_gone", ObjectID: "in_3", Customer: "cus_1"},
		{EventID: "evt_other_type", EventType: "customer.created", Customer: "cus_1"},
		{EventID: "evt_pending", Queued: true, Customer: "cus_1"},
	})
	if _, err := b.pool.Exec(t.Context(), `UPDATE processed_webhook_events SET payload = NULL WHERE event_id = 'evt_paid_gone'`); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	filter := url.Values{
		"from": {now.Add(-time.Hour).Format(views.ReplayFormTime)}, "to": {now.Add(time.Hour).Format(views.ReplayFormTime)},
		"types": {"invoice.*"}, "object": {"cus_1"}, "status": {"processed"},
	}
	start := url.Values{"name": {"app bug #123 fix"}}
	for k, v := range filter {
		start[k] = v
	}

	viewer := b.client(t)
	viewer.signIn(accounts.RoleViewer)
	wantStatus(t, viewer.get("/replays"), http.StatusOK)
	if viewer.get("/replays").doc.Find(`form[action="/replays/preview"]`).Length() != 0 {
		t.Error("a viewer is offered a new replay")
	}
	wantStatus(t, viewer.post("/replays/preview", maps.Clone(filter)), http.StatusForbidden)
	wantStatus(t, viewer.post("/replays", maps.Clone(start)), http.StatusForbidden)

	op := b.client(t)
	op.signIn(accounts.RoleOperator)
	r := op.post("/replays/preview", url.Values{"from": filter["from"], "to": filter["to"]})
	wantStatus(t, r, http.StatusBadRequest)
	if got := testid(r.doc, "replay-problem"); !strings.Contains(got, "choose at least one status") {
		t.Errorf("a preview without a status says %q", got)
	}
	r = op.post("/replays/preview", maps.Clone(filter))
	wantStatus(t, r, http.StatusOK)
	if got := testid(r.doc, "replay-count"); got != "Replay 2 events matching" {
		t.Errorf("preview heading %q", got)
	}
	if got := testid(r.doc, "replay-unreplayable"); !strings.Contains(got, "1 more matches") || !strings.Contains(got, "skips it") {
		t.Errorf("preview of the skipped %q", got)
	}
	if got := r.doc.Find(`[data-testid="replay-sample"]`).Length(); got != 3 {
		t.Errorf("%d sampled events, want 3", got)
	}

	wantStatus(t, op.post("/replays", maps.Clone(filter)), http.StatusBadRequest) // no name
	page := op.follow(op.post("/replays", maps.Clone(start)))
	wantStatus(t, page, http.StatusOK)
	if got := testid(page.doc, "replay-remaining"); got != "2" {
		t.Errorf("a new replay has %q remaining, want 2", got)
	}
	entry := lastAudit(t, b, audit.ReplayStart)
	if entry.Email != "operator@example.com" || entry.Count != 2 || !strings.Contains(entry.Target, "app bug #123 fix") {
		t.Errorf("start audited as %+v", entry)
	}
	rs, err := b.store.Replays(t.Context(), 0, queue.MaxReplaysListed)
	if err != nil || len(rs) != 1 {
		t.Fatalf("replays: %v, %v", rs, err)
	}
	id := rs[0].ID
	path := "/replays/" + strconv.FormatInt(id, 10)
	wantStatus(t, viewer.post(path+"/cancel", url.Values{}), http.StatusForbidden)
	if viewer.get(path).doc.Find(`form[action="`+path+`/cancel"]`).Length() != 0 {
		t.Error("a viewer is offered Cancel")
	}

	search := viewer.get("/search?q=evt_paid_1")
	if got := testid(search.doc, "event-replay"); !strings.Contains(got, "app bug #123 fix") || !strings.Contains(got, "waiting") {
		t.Errorf("the event's page lists its replay as %q", got)
	}

	page = op.follow(op.post(path+"/cancel", url.Values{}))
	if got := testid(page.doc, "replay-state"); got != "cancelled by operator@example.com" {
		t.Errorf("after cancel the replay is %q", got)
	}
	if got := testid(viewer.get("/search?q=evt_paid_1").doc, "event-replay"); !strings.Contains(got, "cancelled") {
		t.Errorf("the event's page lists its cancelled replay as %q", got)
	}
	entry = lastAudit(t, b, audit.ReplayCancel)
	if entry.Email != "operator@example.com" || entry.Count != 2 {
		t.Errorf("cancel audited as %+v", entry)
	}
	wantStatus(t, op.get("/replays/999"), http.StatusNotFound)
	r2, err := b.store.Replay(t.Context(), id)
	if err != nil || r2.State != queue.ReplayCancelled {
		t.Fatalf("replay after cancel: %+v, %v", r2, err)
	}
}

// runReplayToEnd starts a replay named name of every processed and pending
// event received in the last hour and runs it through a real Replayer to
// an app over HTTP, which answers each event as app does, until the
// replay is done.
func runReplayToEnd(t *testing.T, b *testBundle, name string, app http.HandlerFunc) queue.Replay {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		app(w, r)
	}))
	t.Cleanup(srv.Close)
	fwd, err := worker.NewForwarder(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.store.StartReplay(t.Context(), name, queue.ReplayFilter{From: time.Now().Add(-time.Hour),
		To: time.Now().Add(time.Hour), Processed: true, Pending: true}, "ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	replayer := worker.NewReplayer(b.store, discardLogger, worker.ProducerConfig{Processor: fwd, Interval: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = replayer.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	queuetest.WaitFor(t, 30*time.Second, "the replay to end", func() bool {
		r, err = b.store.Replay(context.Background(), r.ID)
		return err == nil && r.State != queue.ReplayRunning
	})
	return r
}

// TestReplays_AReplayDoesNotRewriteHowAnEventWasProcessed: an event
// processed on its first delivery, then replayed, still says so on its
// page, which names the replay that sent it again apart, and labels that
// attempt as the replay's; an event a replay took off the queue says the
// replay processed it, and names it.
func TestReplays_AReplayDoesNotRewriteHowAnEventWasProcessed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	queuetest.InsertLogged(t, b.pool, []queuetest.LoggedOpts{{EventID: "evt_inline"}, {EventID: "evt_waiting", Queued: true}})
	runReplayToEnd(t, b, "app bug #123 fix", func(http.ResponseWriter, *http.Request) {})

	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	page := c.get("/search?q=evt_inline")
	wantStatus(t, page, http.StatusOK)
	if got := testid(page.doc, "search-how"); got != "on its first delivery, while Stripe waited" {
		t.Errorf("a replayed event processed inline says it was processed %q", got)
	}
	if got := testid(page.doc, "search-replayed-by"); !strings.Contains(got, "“app bug #123 fix”") || !strings.Contains(got, "delivered") {
		t.Errorf("the replay that sent it again is listed as %q", got)
	}
	labels := page.doc.Find(`[data-testid="attempt-label"]`)
	if labels.Length() != 1 || strings.TrimSpace(labels.Text()) != "Replay “app bug #123 fix”" {
		t.Errorf("its attempts are labelled %q, want the replay's one", labels.Text())
	}

	page = c.get("/search?q=evt_waiting")
	wantStatus(t, page, http.StatusOK)
	if got := testid(page.doc, "search-how"); got != "by replay “app bug #123 fix”, after it waited on the queue" {
		t.Errorf("an event a replay took off the queue says it was processed %q", got)
	}
	if n := page.doc.Find(`[data-testid="search-replayed"]`).Length(); n != 0 {
		t.Error("the replay that processed an event is listed as sending it again")
	}
	var got []string
	page.doc.Find(`[data-testid="attempt-label"]`).Each(func(_ int, s *goquery.Selection) {
		got = append(got, strings.TrimSpace(s.Text()))
	})
	if strings.Join(got, ", ") != "Inline attempt, Replay “app bug #123 fix”" {
		t.Errorf("its attempts are labelled %q", got)
	}
}

// TestReplays_ThePageListsItsFailedDeliveries: a replay's page lists each
// event whose delivery failed, linked to its page, with its type and what
// the app answered, and not the events it delivered.
func TestReplays_ThePageListsItsFailedDeliveries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	queuetest.InsertLogged(t, b.pool, []queuetest.LoggedOpts{{EventID: "evt_taken"},
		{EventID: "evt_refused", EventType: "customer.updated"}})
	r := runReplayToEnd(t, b, "app bug #123 fix", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Hookd-Event-Id") == "evt_refused" {
			http.Error(w, `{"error":"Unknown customer cus_9"}`, http.StatusUnprocessableEntity)
		}
	})
	if r.Failed != 1 || r.Delivered != 1 {
		t.Fatalf("the replay ended with %d delivered and %d failed, want 1 and 1", r.Delivered, r.Failed)
	}

	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	page := c.get("/replays/" + strconv.FormatInt(r.ID, 10))
	wantStatus(t, page, http.StatusOK)
	rows := page.doc.Find(`[data-testid="replay-failure"]`)
	if rows.Length() != 1 {
		t.Fatalf("%d failed deliveries listed, want 1", rows.Length())
	}
	if id, _ := rows.Attr("data-event-id"); id != "evt_refused" {
		t.Errorf("the failed delivery listed is %q's", id)
	}
	if href, _ := rows.Find("a").Attr("href"); href != "/search?q=evt_refused" {
		t.Errorf("the failed event links to %q, want its page", href)
	}
	text := strings.Join(strings.Fields(rows.Text()), " ")
	for _, want := range []string{"customer.updated", "HTTP 422", "Unknown customer cus_9"} {
		if !strings.Contains(text, want) {
			t.Errorf("the failed delivery reads %q, without %q", text, want)
		}
	}
	if got := page.doc.Find(`[data-testid="replay-failure-error"]`).Text(); !strings.Contains(got, "Unknown customer cus_9") {
		t.Errorf("its error reads %q", got)
	}
}
