package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

func insertDead(t *testing.T, b *testBundle, eventID string) queue.Event {
	t.Helper()
	return queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: eventID, Status: queue.StatusDead, Attempts: queue.MaxAttempts})
}

func eventNow(t *testing.T, b *testBundle, e queue.Event) queue.Event {
	t.Helper()
	got, err := b.store.Event(context.Background(), e.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// insertMarkers writes n dedup markers processed age ago.
func insertMarkers(t *testing.T, b *testBundle, prefix string, n int, age time.Duration) {
	t.Helper()
	_, err := b.pool.Exec(context.Background(), `
		INSERT INTO processed_webhook_events (event_id, processed_at)
		SELECT $1 || g, now() - make_interval(secs => $3) FROM generate_series(1, $2) g`,
		prefix, n, age.Seconds())
	if err != nil {
		t.Fatal(err)
	}
}

func TestOverview_ShowsTheQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for range 2 {
		queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusFailed})
	}
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 1, DueIn: time.Hour, Age: 3 * time.Hour})
	insertDead(t, b, "evt_dead_overview")
	insertMarkers(t, b, "evt_m_", 1234, time.Hour)
	if err := b.store.RecordRetrierTick(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.store.RecordPrune(ctx, 5); err != nil {
		t.Fatal(err)
	}

	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	for _, path := range []string{"/", "/overview/stats"} {
		r := c.get(path)
		wantStatus(t, r, http.StatusOK)
		for id, want := range map[string]string{
			"count-failed":    "2",
			"count-retrying":  "1",
			"count-dead":      "1",
			"count-due":       "2",
			"oldest-pending":  "3 h",
			"marker-count":    "1,234",
			"pruner-last-run": "just now",
			"retrier-status":  "alive",
		} {
			if got := testid(r.doc, id); got != want {
				t.Errorf("GET %s: %s = %q, want %q", path, id, got, want)
			}
		}
		stats := r.doc.Find("#stats")
		if trig, _ := stats.Attr("hx-trigger"); trig != "every 2s" {
			t.Errorf("GET %s: stats block hx-trigger %q, want every 2s", path, trig)
		}
		if get, _ := stats.Attr("hx-get"); get != "/overview/stats" {
			t.Errorf("GET %s: stats block hx-get %q", path, get)
		}
	}
}

func TestOverview_StatsFragmentWithoutSessionRedirectsTheWholePage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	req, _ := http.NewRequest(http.MethodGet, b.srv.URL+"/overview/stats", nil)
	req.Header.Set("HX-Request", "true")
	r := c.do(req)
	if got := r.header.Get("HX-Redirect"); !strings.HasPrefix(got, "/login") {
		t.Fatalf("HX-Redirect %q, want /login...", got)
	}
	if r.status != http.StatusUnauthorized || !strings.Contains(r.body, "session has ended") {
		t.Errorf("%d %q: want 401 saying the session has ended", r.status, r.body)
	}
}

// Every 4xx says why: a handler's own message about what is missing or
// wrong reaches the page, and only an address no route knows gets the
// general one.
func TestErrors_SayWhy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(accounts.RoleOperator)
	for _, tc := range []struct {
		path   string
		status int
		want   string
	}{
		{"/events?status=bogus", http.StatusBadRequest, `no list of "bogus" events: the lists are dead, pending, failed and retrying`},
		{"/replays/abc", http.StatusNotFound, "a replay's id is a number"},
		{"/replays/999999", http.StatusNotFound, "No such replay: it may have been pruned"},
		{"/no/such/page", http.StatusNotFound, "There is no page at this address."},
	} {
		r := c.get(tc.path)
		wantStatus(t, r, tc.status)
		if got := r.doc.Find(`[role="alert"]`).Text(); !strings.Contains(got, tc.want) {
			t.Errorf("GET %s: the page says %q, want %q", tc.path, got, tc.want)
		}
	}
}

func TestRetry_SendsADeadEventBackAndAuditsIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	u := c.signIn(accounts.RoleOperator)
	dead := insertDead(t, b, "evt_retry_me")
	other := insertDead(t, b, "evt_leave_me")

	list := c.get("/events?status=dead")
	row := list.doc.Find(`tr[data-testid="event-row"][data-event-id="evt_retry_me"]`)
	if row.Find(`button:contains("Retry")`).Length() != 1 {
		t.Fatalf("row of evt_retry_me has no Retry button")
	}
	action, _ := row.Find("form").Attr("action")
	r := c.post(action, url.Values{"back": {"/events?status=dead"}})
	page := c.follow(r)
	if got := testid(page.doc, "flash"); got != "evt_retry_me queued for retry" {
		t.Errorf("flash %q, want %q", got, "evt_retry_me queued for retry")
	}

	e := eventNow(t, b, dead)
	if e.Status != queue.StatusFailed || e.Attempts != 0 || !e.ManualRetry {
		t.Errorf("after retry: status %s, attempts %d, manual_retry %v; want failed, 0, true", e.Status, e.Attempts, e.ManualRetry)
	}
	if e := eventNow(t, b, other); e.Status != queue.StatusDead {
		t.Errorf("the other dead event is %s, want dead", e.Status)
	}
	a := lastAudit(t, b, audit.Retry)
	if a.Email != u.Email || a.Target != "evt_retry_me" || a.Count != 1 {
		t.Errorf("audit entry %+v, want retry of evt_retry_me by %s, count 1", a, u.Email)
	}
}

func TestRetryAll_ActsOnTheFilterAfterConfirmation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(accounts.RoleOperator)
	var match, rest []queue.Event
	for i := range 3 {
		match = append(match, queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: fmt.Sprintf("evt_match_%d", i),
			Status: queue.StatusDead, Attempts: 5, EventType: "invoice.paid", LastError: "dial tcp: i/o TIMEOUT"}))
	}
	rest = append(rest,
		queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5, EventType: "invoice.paid", LastError: "HTTP 500"}),
		queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5, EventType: "charge.failed", LastError: "timeout"}),
	)

	list := c.get("/events?status=dead&type=invoice.paid&error=timeout")
	if n := list.doc.Find(`[data-testid="event-row"]`).Length(); n != 3 {
		t.Fatalf("filtered list has %d rows, want 3", n)
	}
	form := list.doc.Find(`form:has(button:contains("Retry all"))`)
	action, _ := form.Attr("action")
	confirm := c.post(action, formValues(form))
	wantStatus(t, confirm, http.StatusOK)
	if text := confirm.doc.Find("main").Text(); !strings.Contains(text, "Retry all 3 matching events?") {
		t.Fatalf("confirmation page does not ask %q:\n%s", "Retry all 3 matching events?", text)
	}
	for _, e := range match {
		if eventNow(t, b, e).Status != queue.StatusDead {
			t.Fatalf("the confirmation page changed %s", e.EventID)
		}
	}

	form = confirm.doc.Find(`form:has(button:contains("Confirm retry all"))`)
	action, _ = form.Attr("action")
	page := c.follow(c.post(action, formValues(form)))
	if got := testid(page.doc, "flash"); got != "3 events queued for retry" {
		t.Errorf("flash %q, want %q", got, "3 events queued for retry")
	}
	for _, e := range match {
		if got := eventNow(t, b, e); got.Status != queue.StatusFailed || !got.ManualRetry {
			t.Errorf("%s is %s after retry all, want failed and manual", e.EventID, got.Status)
		}
	}
	for _, e := range rest {
		if got := eventNow(t, b, e); got.Status != queue.StatusDead {
			t.Errorf("%s (outside the filter) is %s, want dead", e.EventID, got.Status)
		}
	}
	if a := lastAudit(t, b, audit.RetryAll); a.Count != 3 || !strings.Contains(a.Target, "invoice.paid") {
		t.Errorf("audit entry %+v, want retry_all of 3 naming the filter", a)
	}
}

func TestRetryNow_MakesAPendingEventDue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(accounts.RoleOperator)
	e := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_later", Status: queue.StatusRetrying, Attempts: 2, DueIn: 2 * time.Hour})

	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_first", Status: queue.StatusFailed, DueIn: time.Minute})
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_gone", Status: queue.StatusDead, Attempts: 5})

	// Pending lists both pending statuses, soonest due first.
	list := c.get("/events?status=pending")
	ids := list.doc.Find(`[data-testid="event-row"]`).Map(func(_ int, s *goquery.Selection) string {
		id, _ := s.Attr("data-event-id")
		return id
	})
	if strings.Join(ids, ",") != "evt_first,evt_later" {
		t.Fatalf("pending list shows %v, want [evt_first evt_later]", ids)
	}
	row := list.doc.Find(`tr[data-event-id="evt_later"]`)
	action, ok := row.Find(`form:has(button:contains("Retry now"))`).Attr("action")
	if !ok {
		t.Fatal("pending row has no Retry now button")
	}
	page := c.follow(c.post(action, url.Values{"back": {"/events?status=pending"}}))
	if got := testid(page.doc, "flash"); got != "evt_later queued for retry" {
		t.Errorf("flash %q", got)
	}
	var due bool
	if err := b.pool.QueryRow(context.Background(),
		`SELECT next_retry_at <= now() FROM webhook_events WHERE id = $1`, e.ID).Scan(&due); err != nil {
		t.Fatal(err)
	}
	got := eventNow(t, b, e)
	if !due || !got.ManualRetry || got.Attempts != 2 || got.Status != queue.StatusRetrying {
		t.Errorf("after retry now: due %v, manual %v, attempts %d, status %s; want true, true, 2, retrying",
			due, got.ManualRetry, got.Attempts, got.Status)
	}
	if a := lastAudit(t, b, audit.RetryNow); a.Target != "evt_later" || a.Count != 1 {
		t.Errorf("audit entry %+v", a)
	}
}

func TestPrune_ConfirmsThenRemovesOldMarkers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(accounts.RoleAdmin)
	insertMarkers(t, b, "evt_old_", 1234, 40*24*time.Hour)
	insertMarkers(t, b, "evt_new_", 2, time.Hour)

	overview := c.get("/")
	if days, _ := overview.doc.Find(`input[name="days"]`).Attr("value"); days != "30" {
		t.Errorf("days defaults to %q, want 30 (the retention)", days)
	}
	confirm := c.post("/prune/preview", url.Values{"days": {"30"}})
	wantStatus(t, confirm, http.StatusOK)
	if text := confirm.doc.Find("main").Text(); !strings.Contains(text, "will remove 1,234 event ids older than 30 days from the redelivery guard") {
		t.Fatalf("confirmation does not say what it removes:\n%s", text)
	}
	if n := queuetest.Markers(t, b.pool); n != 1236 {
		t.Fatalf("the confirmation page removed markers: %d left, want 1236", n)
	}

	page := c.follow(c.post("/prune", url.Values{"days": {"30"}}))
	if got := testid(page.doc, "flash"); got != "Removed 1,234 event ids older than 30 days from the redelivery guard" {
		t.Errorf("flash %q", got)
	}
	if n := queuetest.Markers(t, b.pool); n != 2 {
		t.Errorf("%d markers left, want 2", n)
	}
	ws, err := b.store.WorkerStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ws.PrunerRun == nil || ws.PrunerRemoved != 1234 {
		t.Errorf("worker status after prune: %+v, want a run that removed 1234", ws)
	}
	if a := lastAudit(t, b, audit.Prune); a.Count != 1234 || !strings.Contains(a.Target, "30 days") {
		t.Errorf("audit entry %+v", a)
	}
}

func TestPrune_RejectsBadDays(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(accounts.RoleAdmin)
	insertMarkers(t, b, "evt_old_", 3, 40*24*time.Hour)
	for _, days := range []string{"0", "-3", "abc", "", "1.5", "1", "2"} {
		for _, path := range []string{"/prune/preview", "/prune"} {
			c.get("/")
			r := c.post(path, url.Values{"days": {days}})
			wantStatus(t, r, http.StatusUnprocessableEntity)
			// Fewer than 3 days would let Stripe's redeliveries of the
			// pruned events be processed again; the refusal says so.
			alert := r.doc.Find(`[role="alert"]`).Text()
			if !strings.Contains(alert, "at least 3") || !strings.Contains(alert, "Stripe redelivers an event for up to 3 days") {
				t.Errorf("POST %s days=%q: alert %q, want it to say at least 3 and why", path, days, alert)
			}
		}
	}
	if n := queuetest.Markers(t, b.pool); n != 3 {
		t.Errorf("%d markers left after bad input, want 3", n)
	}
	if n := countAudit(t, b, audit.Prune); n != 0 {
		t.Errorf("%d prune entries, want 0", n)
	}
}

func TestPrune_ThreeDaysIsTheShortestWindow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(accounts.RoleAdmin)
	insertMarkers(t, b, "evt_older_", 4, 4*24*time.Hour)
	insertMarkers(t, b, "evt_within_", 2, 2*24*time.Hour)
	c.get("/")
	page := c.follow(c.post("/prune", url.Values{"days": {"3"}}))
	if got := testid(page.doc, "flash"); got != "Removed 4 event ids older than 3 days from the redelivery guard" {
		t.Errorf("flash %q", got)
	}
	if n := queuetest.Markers(t, b.pool); n != 2 {
		t.Errorf("%d markers left, want the 2 within Stripe's redelivery window", n)
	}
}

func TestRoles_ForbiddenActionsAreHiddenAndRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dead := insertDead(t, b, "evt_roles")
	pending := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 1, DueIn: time.Hour})
	insertMarkers(t, b, "evt_old_", 3, 40*24*time.Hour)

	viewer := b.client(t)
	viewer.signIn(accounts.RoleViewer)
	list := viewer.get("/events?status=dead")
	if n := list.doc.Find("main button").Length(); n != 1 { // Filter
		t.Errorf("viewer sees %d buttons on the dead list, want only Filter", n)
	}
	for _, path := range []string{
		"/events/" + dead.ID.String() + "/retry",
		"/events/" + pending.ID.String() + "/retry-now",
		"/events/retry-all",
		"/prune",
	} {
		r := viewer.post(path, url.Values{"days": {"30"}})
		wantStatus(t, r, http.StatusForbidden)
	}
	if e := eventNow(t, b, dead); e.Status != queue.StatusDead {
		t.Errorf("viewer's retry changed the event to %s", e.Status)
	}

	op := b.client(t)
	op.signIn(accounts.RoleOperator)
	if op.get("/").doc.Find(`input[name="days"]`).Length() != 0 {
		t.Error("operator sees the prune form")
	}
	for _, path := range []string{"/prune/preview", "/prune"} {
		r := op.post(path, url.Values{"days": {"30"}})
		wantStatus(t, r, http.StatusForbidden)
	}
	if n := queuetest.Markers(t, b.pool); n != 3 {
		t.Errorf("operator's prune removed markers: %d left, want 3", n)
	}
	if n := len(auditEntries(t, b)); n != 2 { // the two sign-ins
		t.Errorf("%d audit entries, want only the 2 sign-ins", n)
	}
}

func TestEvents_PagesFiltersAndSearch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(accounts.RoleViewer)

	empty := c.get("/events?status=dead")
	if !strings.Contains(empty.doc.Find("main").Text(), "No dead events") {
		t.Error(`empty dead list does not say "No dead events"`)
	}
	if !strings.Contains(c.get("/events?status=failed").doc.Find("main").Text(), "No pending events") {
		t.Error(`empty pending list does not say "No pending events"`)
	}

	_, err := b.pool.Exec(context.Background(), `
		INSERT INTO webhook_events (source, event_id, event_type, payload, status, attempts, last_error, created_at)
		SELECT 'stripe', 'evt_page_' || g, 'invoice.paid', '{}', 'dead', 5, 'HTTP 500', now() - make_interval(mins => g)
		FROM generate_series(1, 120) g`)
	if err != nil {
		t.Fatal(err)
	}
	first := c.get("/events?status=dead")
	rows := first.doc.Find(`[data-testid="event-row"]`)
	if rows.Length() != 50 {
		t.Fatalf("first page has %d rows, want 50", rows.Length())
	}
	if id, _ := rows.First().Attr("data-event-id"); id != "evt_page_1" {
		t.Errorf("first row is %s, want the newest, evt_page_1", id)
	}
	if !strings.Contains(first.doc.Find("main").Text(), "of 120 events") {
		t.Error("first page does not show the total of 120")
	}
	next, ok := first.doc.Find(`a[rel="next"]`).Attr("href")
	if !ok {
		t.Fatal("first page has no next link")
	}
	third := c.get(strings.Replace(next, "page=2", "page=3", 1))
	if n := third.doc.Find(`[data-testid="event-row"]`).Length(); n != 20 {
		t.Errorf("third page has %d rows, want 20", n)
	}
	if third.doc.Find(`a[rel="prev"]`).Length() != 1 || third.doc.Find(`a[rel="next"]`).Length() != 0 {
		t.Error("last page should have a previous link and no next link")
	}

	found := c.get("/events?status=dead&q=evt_page_77")
	if ids := found.doc.Find(`[data-testid="event-row"]`).Map(func(_ int, s *goquery.Selection) string {
		id, _ := s.Attr("data-event-id")
		return id
	}); len(ids) != 1 || ids[0] != "evt_page_77" {
		t.Errorf("search for evt_page_77 found %v", ids)
	}
	// An id this list does not have: the page says where the event is.
	pending := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_elsewhere", Status: queue.StatusRetrying, Attempts: 1})
	elsewhere := c.get("/events?status=dead&q=evt_elsewhere")
	if href, _ := elsewhere.doc.Find(`main a:contains("open it")`).Attr("href"); href != "/events/"+pending.ID.String() {
		t.Errorf("search for a retrying event on the dead list links to %q, want its detail page", href)
	}
	if err := queuetest.NewSeed(b.store).MarkProcessed(context.Background(), "evt_done"); err != nil {
		t.Fatal(err)
	}
	if text := c.get("/events?status=dead&q=evt_done").doc.Find("main").Text(); !strings.Contains(text, "evt_done was processed successfully") {
		t.Errorf("search for a processed event does not say so:\n%s", text)
	}
	for _, label := range []string{"Event type", "Error contains", "Event id"} {
		if found.doc.Find(`label:contains("`+label+`")`).Length() != 1 {
			t.Errorf("filter form has no label %q", label)
		}
	}
}

func TestEvent_DetailEscapesThePayload(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(accounts.RoleOperator)
	hostile := `{"id":"evt_hostile","type":"invoice.paid","data":{"note":"</pre><script>alert(1)</script>"}}`
	e := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_hostile", Status: queue.StatusDead, Attempts: 5,
		Payload: hostile, LastError: "<img src=x onerror=alert(2)>"})
	for i := range 2 {
		queuetest.InsertAttempt(t, b.pool, queue.NewAttempt{Source: queue.SourceStripe, EventID: "evt_hostile",
			Duration: time.Duration(i+1) * 100 * time.Millisecond, HTTPStatus: 500, Error: "HTTP 500", Path: queue.PathRetry, Number: i})
	}

	r := c.get("/events/" + e.ID.String())
	wantStatus(t, r, http.StatusOK)
	if strings.Contains(r.body, "<script>alert(1)") || strings.Contains(r.body, "<img src=x") {
		t.Fatal("the page contains the payload's markup unescaped")
	}
	if !strings.Contains(r.body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the page does not show the escaped script")
	}
	payload := r.doc.Find(`pre[data-testid="payload"]`).Text()
	if !strings.Contains(payload, "\n  \"id\": \"evt_hostile\"") || !strings.Contains(payload, "<script>alert(1)</script>") {
		t.Errorf("payload not shown pretty-printed as text:\n%s", payload)
	}
	if n := r.doc.Find(`[data-testid="attempt-row"]`).Length(); n != 2 {
		t.Errorf("%d attempt rows, want 2", n)
	}
	if r.doc.Find(`main button:contains("Retry")`).Length() != 1 {
		t.Error("detail of a dead event has no Retry button")
	}
}

func TestEvent_UnknownOrMalformedIDIs404(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(accounts.RoleOperator)
	for _, id := range []string{uuid.NewString(), "not-a-uuid", "evt_123"} {
		r := c.get("/events/" + id)
		wantStatus(t, r, http.StatusNotFound)
		if r.doc.Find(`[role="alert"]`).Length() == 0 {
			t.Errorf("GET /events/%s: 404 page has no alert", id)
		}
		r = c.post("/events/"+id+"/retry", nil)
		wantStatus(t, r, http.StatusNotFound)
	}
}

// Support staff paste Stripe's evt_ id: /events/evt_... is the event's
// page, the same as at its row's id. An evt_ id not on the queue is a
// 404 that says where to look instead.
func TestEvent_PageByStripeEventID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	e := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_1SupportPaste", Status: queue.StatusDead, Attempts: 5})
	byRow, byEventID := c.get("/events/"+e.ID.String()), c.get("/events/evt_1SupportPaste")
	wantStatus(t, byEventID, http.StatusOK)
	for _, part := range []string{"h1", `pre[data-testid="payload"]`} {
		got, want := byEventID.doc.Find(part).Text(), byRow.doc.Find(part).Text()
		if got != want || want == "" {
			t.Errorf("/events/evt_1SupportPaste's %s is %q, want the page's at its row's id, %q", part, got, want)
		}
	}
	if !strings.Contains(byEventID.doc.Find("h1").Text(), "evt_1SupportPaste") {
		t.Errorf("the page's title %q does not name the event", byEventID.doc.Find("h1").Text())
	}

	gone := c.get("/events/evt_1Delivered")
	wantStatus(t, gone, http.StatusNotFound)
	if got := gone.doc.Find(`[role="alert"]`).Text(); !strings.Contains(got, "evt_1Delivered is not on the queue") ||
		!strings.Contains(got, "/search?q=evt_1Delivered") {
		t.Errorf("an evt_ id not on the queue says %q, want where to look", got)
	}
}

// The event page's count agrees with its history: a dead event has had
// its first delivery and five retries, six attempts, and the one that
// never came back is shown as no answer, not as an answer that failed.
func TestEvent_AttemptCountAgreesWithHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	e := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_1SixAttempts", Status: queue.StatusDead,
		Attempts: queue.MaxAttempts, LastError: queuetest.CrashedError(queue.MaxAttempts)})
	for n := range queue.MaxAttempts + 1 {
		a := queue.NewAttempt{Source: queue.SourceStripe, EventID: "evt_1SixAttempts", Duration: time.Second,
			HTTPStatus: 500, Error: "HTTP 500", Path: queue.PathRetry, Number: n}
		switch n {
		case 0:
			a.Path = queue.PathInline
		case queue.MaxAttempts:
			a.HTTPStatus, a.Error = 0, queuetest.CrashedError(n)
		}
		queuetest.InsertAttempt(t, b.pool, a)
	}
	r := c.get("/events/" + e.ID.String())
	wantStatus(t, r, http.StatusOK)
	rows := r.doc.Find(`[data-testid="attempt-row"]`)
	if rows.Length() != queue.MaxAttempts+1 {
		t.Fatalf("%d attempts in the history, want %d", rows.Length(), queue.MaxAttempts+1)
	}
	facts := map[string]string{}
	r.doc.Find("dl.facts dt").Each(func(_ int, dt *goquery.Selection) {
		facts[strings.TrimSpace(dt.Text())] = strings.Join(strings.Fields(dt.Next().Text()), " ")
	})
	if facts["Attempts"] != "6 (1 no answer)" || facts["Retries"] != "5 of 5 used" {
		t.Errorf("Attempts %q, Retries %q; want 6 (1 no answer) above the six in the history, and 5 of 5 used",
			facts["Attempts"], facts["Retries"])
	}
	if got := strings.TrimSpace(rows.Last().Find("strong + span").Text()); got != "no answer" {
		t.Errorf("the interrupted attempt's outcome is %q, want no answer", got)
	}
	if got := strings.TrimSpace(rows.First().Find("strong + span").Text()); got != "failed" {
		t.Errorf("the inline attempt's outcome is %q, want failed", got)
	}
	// The list's column counts what the row counts, and says so.
	list := c.get("/events?status=dead")
	if got := strings.TrimSpace(list.doc.Find(`[data-event-id="evt_1SixAttempts"] td[data-label="Retries"]`).Text()); got != "5" {
		t.Errorf("the dead list's Retries for the event is %q, want 5", got)
	}
}

func TestAudit_ListsActionsNewestFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	u := c.signIn(accounts.RoleOperator)
	dead := insertDead(t, b, "evt_audited")
	c.get("/events?status=dead")
	c.post("/events/"+dead.ID.String()+"/retry", nil)

	r := c.get("/audit")
	rows := r.doc.Find(`tr[data-testid="audit-row"]`)
	if rows.Length() != 2 {
		t.Fatalf("%d audit rows, want 2", rows.Length())
	}
	cells := rows.First().Find("td").Map(func(_ int, s *goquery.Selection) string { return strings.TrimSpace(s.Text()) })
	// Who: the email, and the account beside it.
	want := []string{"just now", fmt.Sprintf("%s account %d", u.Email, u.ID), "retry", "evt_audited", "1"}
	if strings.Join(cells, "|") != strings.Join(want, "|") {
		t.Errorf("newest row %q, want %q", cells, want)
	}
	if action := strings.TrimSpace(rows.Eq(1).Find("td").Eq(2).Text()); action != "login" {
		t.Errorf("second row's action %q, want login", action)
	}
}

// Retry on an event's page returns to Find an event, which follows the
// event wherever it went: here the retry loop has processed it, and deleted
// its queue row, before the browser followed the redirect.
func TestRetry_FromTheDetailPageLandsWhereTheEventNowIs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(accounts.RoleOperator)
	dead := insertDead(t, b, "evt_fast_retry")

	detail := c.get("/events/" + dead.ID.String())
	form := detail.doc.Find(`form:has(button:contains("Retry"))`)
	action, _ := form.Attr("action")
	back, _ := form.Find(`input[name="back"]`).Attr("value")
	r := c.post(action, url.Values{"back": {back}})
	if loc := r.header.Get("Location"); loc != "/search?q=evt_fast_retry" {
		t.Fatalf("Retry redirects to %q, want Find an event for evt_fast_retry", loc)
	}
	// The retry loop wins the race with the browser.
	if err := queuetest.NewSeed(b.store).Resolve(context.Background(), dead.ID); err != nil {
		t.Fatal(err)
	}
	page := c.follow(r)
	if page.status != http.StatusOK {
		t.Fatalf("after Retry: status %d, want 200", page.status)
	}
	if got := testid(page.doc, "flash"); got != "evt_fast_retry queued for retry" {
		t.Errorf("flash %q, want %q", got, "evt_fast_retry queued for retry")
	}
	if got, _ := page.doc.Find(`[data-testid="search-answer"]`).Attr("data-answer"); got != "processed" {
		t.Errorf("Find an event answers %q, want processed", got)
	}
}
