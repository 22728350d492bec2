package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

func TestFailures_EmptyStateSaysWhatLandsThere(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	r := c.get("/failures")
	wantStatus(t, r, http.StatusOK)
	if text := r.doc.Find(".empty").Text(); !strings.Contains(text, "No failures") ||
		!strings.Contains(text, "Every event whose processing failed lands here") {
		t.Errorf("empty failures page says %q", strings.Join(strings.Fields(text), " "))
	}
}

func TestFailures_GroupsLinkToTheirEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, e := range []queuetest.EventOpts{
		{Status: queue.StatusDead, Attempts: 5, LastError: "timeout after 10s for evt_A"},
		{Status: queue.StatusDead, Attempts: 5, LastError: "timeout after 12s for evt_B"},
		{Status: queue.StatusRetrying, Attempts: 2, LastError: "timeout after 11s for evt_C"},
		{Status: queue.StatusFailed, LastError: "downstream answered 404: no route"},
	} {
		queuetest.InsertEvent(t, b.pool, e)
	}
	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	r := c.get("/failures")
	wantStatus(t, r, http.StatusOK)
	rows := r.doc.Find(`[data-testid="failure-group"]`)
	if rows.Length() != 2 {
		t.Fatalf("%d groups, want 2:\n%s", rows.Length(), r.body)
	}
	first := rows.First()
	for id, want := range map[string]string{
		"failure-error":   "timeout after <n>s for <id>",
		"failure-pending": "1",
		"failure-dead":    "2",
	} {
		if got := strings.TrimSpace(first.Find(`[data-testid="` + id + `"]`).Text()); got != want {
			t.Errorf("first group's %s: %q, want %q", id, got, want)
		}
	}
	if first.Find("button").Length() != 0 {
		t.Error("a viewer sees Retry group")
	}
	href, _ := first.Find(`[data-testid="failure-dead"] a`).Attr("href")
	list := c.get(href)
	wantStatus(t, list, http.StatusOK)
	if n := list.doc.Find(`[data-testid="event-row"]`).Length(); n != 2 {
		t.Errorf("the group's dead list %s has %d rows, want 2", href, n)
	}
	if got := testid(list.doc, "group-filter"); !strings.Contains(got, "timeout after <n>s for <id>") {
		t.Errorf("the group's dead list does not say it shows one group: %q", got)
	}
}

func TestRetryGroup_ConfirmsThenRetriesTheWholeGroupAndAuditsIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var group []queue.Event
	for _, e := range []queuetest.EventOpts{
		{Status: queue.StatusDead, Attempts: 5, LastError: "timeout after 10s for evt_A"},
		{Status: queue.StatusDead, Attempts: 5, LastError: "timeout after 12s for evt_B"},
		{Status: queue.StatusRetrying, Attempts: 2, DueIn: time.Hour, LastError: "timeout after 11s for evt_C"},
	} {
		group = append(group, queuetest.InsertEvent(t, b.pool, e))
	}
	otherType := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventType: "charge.refunded",
		Status: queue.StatusDead, Attempts: 5, LastError: "timeout after 10s for evt_D"})
	otherError := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{
		Status: queue.StatusDead, Attempts: 5, LastError: "downstream answered 404: no route"})

	// Filtered to invoice.paid, the group is the timeouts of that type
	// only: the charge.refunded one stays dead.
	c := b.client(t)
	c.signIn(accounts.RoleOperator)
	r := c.get("/failures?type=invoice.paid")
	form := r.doc.Find(`[data-testid="failure-group"]`).First().Find("form")
	action, _ := form.Attr("action")
	confirm := c.post(action, formValues(form))
	wantStatus(t, confirm, http.StatusOK)
	if got := strings.Join(strings.Fields(testid(confirm.doc, "retry-group-count")), " "); !strings.HasPrefix(got,
		"2 dead events go back on the queue with attempts starting over; 1 pending event is retried now") {
		t.Errorf("confirmation says %q", got)
	}
	if h := confirm.doc.Find("h1").Text(); !strings.Contains(h, "Retry 3 events of this failure group?") {
		t.Errorf("confirmation asks %q", h)
	}
	for _, e := range group {
		if got := eventNow(t, b, e); got.ManualRetry {
			t.Fatalf("the confirmation page changed %s", e.EventID)
		}
	}

	form = confirm.doc.Find(`form:has(button:contains("Confirm retry group"))`)
	action, _ = form.Attr("action")
	page := c.follow(c.post(action, formValues(form)))
	if got := testid(page.doc, "flash"); got != "3 events queued for retry" {
		t.Errorf("flash %q, want %q", got, "3 events queued for retry")
	}
	for i, e := range group {
		got := eventNow(t, b, e)
		wantAttempts, wantStatus := 0, queue.StatusFailed
		if i == 2 {
			wantAttempts, wantStatus = 2, queue.StatusRetrying
		}
		if !got.ManualRetry || got.Status != wantStatus || got.Attempts != wantAttempts || got.NextRetryAt.After(time.Now().Add(time.Minute)) {
			t.Errorf("%s after retry group: %s, attempts %d, manual %v, due %s; want %s, attempts %d, manual, due now",
				e.EventID, got.Status, got.Attempts, got.ManualRetry, got.NextRetryAt, wantStatus, wantAttempts)
		}
	}
	for _, e := range []queue.Event{otherType, otherError} {
		if got := eventNow(t, b, e); got.Status != queue.StatusDead || got.ManualRetry {
			t.Errorf("%s (%s, %s) outside the group was changed", e.EventID, e.EventType, *e.LastError)
		}
	}
	a := lastAudit(t, b, audit.RetryGroup)
	if a.Count != 3 || !strings.Contains(a.Target, "invoice.paid") || !strings.Contains(a.Target, "timeout after <n>s for <id>") {
		t.Errorf("audit entry %+v, want retry_group of 3 naming the type and the error", a)
	}
}

func TestRetryGroup_ViewersAreRefusedAndEmptyFormsAreBadRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dead := insertDead(t, b, "evt_group_roles")
	form := url.Values{"type": {dead.EventType}, "group": {"downstream returned <n>"}}

	viewer := b.client(t)
	viewer.signIn(accounts.RoleViewer)
	for _, path := range []string{"/failures/retry/preview", "/failures/retry"} {
		wantStatus(t, viewer.post(path, form), http.StatusForbidden)
	}
	if got := eventNow(t, b, dead); got.Status != queue.StatusDead {
		t.Errorf("a viewer's retry group changed the event to %s", got.Status)
	}

	op := b.client(t)
	op.signIn(accounts.RoleOperator)
	op.get("/failures")
	for _, f := range []url.Values{{"type": {dead.EventType}}, {"type": {dead.EventType}, "group": {"  "}}} {
		for _, path := range []string{"/failures/retry/preview", "/failures/retry"} {
			wantStatus(t, op.post(path, f), http.StatusBadRequest)
		}
	}
	if got := eventNow(t, b, dead); got.Status != queue.StatusDead {
		t.Errorf("a retry group without a group changed the event to %s", got.Status)
	}
}

// A group's retry says how many of its events were in flight: those are
// only marked, and run again when their attempt ends, if it fails.
func TestRetryGroup_SaysWhichEventsWereInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t)
	idle := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 2, DueIn: time.Hour,
		LastError: "timeout after 11s for evt_A"})
	running := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 2, DueIn: time.Hour,
		LastError: "timeout after 12s for evt_B"})
	if _, err := queuetest.NewSeed(b.store).TryLockEvent(context.Background(), running.EventID); err != nil {
		t.Fatal(err)
	}

	c := b.client(t)
	c.signIn(accounts.RoleOperator)
	form := c.get("/failures").doc.Find(`[data-testid="failure-group"]`).First().Find("form")
	action, _ := form.Attr("action")
	confirm := c.post(action, formValues(form))
	form = confirm.doc.Find(`form:has(button:contains("Confirm retry group"))`)
	action, _ = form.Attr("action")
	page := c.follow(c.post(action, formValues(form)))
	want := "2 events queued for retry; of them, 1 event was being delivered: it will run again as soon as the try being delivered ends, if it fails"
	if got := testid(page.doc, "flash"); got != want {
		t.Errorf("flash %q, want %q", got, want)
	}
	if got := eventNow(t, b, idle); !got.ManualRetry || got.NextRetryAt.After(time.Now()) {
		t.Errorf("the idle event: manual %v, due %v; want due now", got.ManualRetry, got.NextRetryAt)
	}
	if got := eventNow(t, b, running); !got.ManualRetry || !got.NextRetryAt.Equal(running.NextRetryAt) {
		t.Errorf("the event in flight: manual %v, due %v; want marked, due unchanged", got.ManualRetry, got.NextRetryAt)
	}
}

// One outage is one row, whatever types it hit: 30 events of 5 types
// refused with one error are one group listing the 5 types with their
// counts, and its Retry group retries all 30. The type filter narrows the
// row to one type.
func TestFailures_OneCauseIsOneRowAcrossTypes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	types := []string{"charge.succeeded", "customer.created", "invoice.paid", "invoice.payment_failed", "payment_intent.succeeded"}
	var events []queue.Event
	for i := range 30 {
		events = append(events, queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventType: types[i%len(types)],
			Status: queue.StatusDead, Attempts: 5,
			LastError: fmt.Sprintf("no answer from downstream: dial tcp 127.0.0.1:%d: connect: connection refused", 4000+i)}))
	}
	other := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventType: "invoice.paid", Status: queue.StatusDead,
		Attempts: 5, LastError: "downstream answered 422: no such customer"})

	c := b.client(t)
	c.signIn(accounts.RoleOperator)
	r := c.get("/failures")
	wantStatus(t, r, http.StatusOK)
	rows := r.doc.Find(`[data-testid="failure-group"]`)
	if rows.Length() != 2 {
		t.Fatalf("%d rows, want 2: the outage and the other error", rows.Length())
	}
	first := rows.First()
	var listed []string
	for _, li := range first.Find(`[data-testid="failure-type"]`).EachIter() {
		listed = append(listed, strings.Join(strings.Fields(li.Text()), " "))
	}
	var want []string
	for _, typ := range types {
		want = append(want, typ+" 6")
	}
	if strings.Join(listed, "; ") != strings.Join(want, "; ") {
		t.Errorf("the outage's row lists %q, want %q", listed, want)
	}
	if got := strings.TrimSpace(first.Find(`[data-testid="failure-dead"]`).Text()); got != "30" {
		t.Errorf("the outage's dead count %q, want 30", got)
	}

	form := first.Find("form")
	action, _ := form.Attr("action")
	confirm := c.post(action, formValues(form))
	wantStatus(t, confirm, http.StatusOK)
	if h := confirm.doc.Find("h1").Text(); !strings.Contains(h, "Retry 30 events of this failure group?") {
		t.Errorf("confirmation asks %q", h)
	}
	if got := strings.Join(strings.Fields(testid(confirm.doc, "retry-group-types")), " "); !strings.Contains(got, "charge.succeeded 6") {
		t.Errorf("confirmation's types %q do not list charge.succeeded 6", got)
	}
	form = confirm.doc.Find(`form:has(button:contains("Confirm retry group"))`)
	action, _ = form.Attr("action")
	page := c.follow(c.post(action, formValues(form)))
	if got := testid(page.doc, "flash"); got != "30 events queued for retry" {
		t.Errorf("flash %q, want %q", got, "30 events queued for retry")
	}
	for _, e := range events {
		if got := eventNow(t, b, e); got.Status != queue.StatusFailed || !got.ManualRetry {
			t.Errorf("%s (%s) after retry group: %s, manual %v; want failed, manual", e.EventID, e.EventType, got.Status, got.ManualRetry)
		}
	}
	if got := eventNow(t, b, other); got.Status != queue.StatusDead || got.ManualRetry {
		t.Errorf("the event of the other error was changed: %s", got.Status)
	}

	filtered := c.get("/failures?type=invoice.paid")
	rows = filtered.doc.Find(`[data-testid="failure-group"]`)
	if rows.Length() != 2 {
		t.Fatalf("filtered to invoice.paid: %d rows, want 2", rows.Length())
	}
	for _, row := range rows.EachIter() {
		if n := row.Find(`[data-testid="failure-type"]`).Length(); n != 1 {
			t.Errorf("filtered to invoice.paid, a row lists %d types, want 1", n)
		}
	}
}

// One error at two destinations is two rows, each naming its destination;
// retrying one retries that destination's deliveries only, and its list
// links show its deliveries only.
func TestRetryGroup_OneDestinationsGroupOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	billing := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Destination: "billing", Status: queue.StatusDead,
		Attempts: 5, LastError: "timeout after 10s"})
	crm := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Destination: "crm", Status: queue.StatusDead,
		Attempts: 5, LastError: "timeout after 11s"})

	c := b.client(t)
	c.signIn(accounts.RoleOperator)
	r := c.get("/failures")
	rows := r.doc.Find(`[data-testid="failure-group"]`)
	if rows.Length() != 2 {
		t.Fatalf("%d failure groups, want one per destination", rows.Length())
	}
	row := r.doc.Find(`[data-testid="failure-group"][data-destination="crm"]`)
	if got := strings.TrimSpace(row.Find(`[data-testid="failure-destination"]`).Text()); got != "crm" {
		t.Errorf("crm's row names destination %q", got)
	}
	href, _ := row.Find(`[data-testid="failure-dead"] a`).Attr("href")
	if list := c.get(href); list.doc.Find(`[data-testid="event-row"]`).Length() != 1 {
		t.Errorf("crm's dead link %s lists %d events, want 1", href, list.doc.Find(`[data-testid="event-row"]`).Length())
	}
	form := row.Find("form")
	action, _ := form.Attr("action")
	confirm := c.post(action, formValues(form))
	wantStatus(t, confirm, http.StatusOK)
	if got := testid(confirm.doc, "retry-group-destination"); got != "crm" {
		t.Errorf("the confirmation names destination %q, want crm", got)
	}
	form = confirm.doc.Find(`form:has(button:contains("Confirm retry group"))`)
	action, _ = form.Attr("action")
	page := c.follow(c.post(action, formValues(form)))
	if got := testid(page.doc, "flash"); got != "1 event queued for retry" {
		t.Errorf("flash %q, want 1 event queued", got)
	}
	if got := eventNow(t, b, crm); got.Status != queue.StatusFailed || !got.ManualRetry {
		t.Errorf("crm's delivery after its group's retry: %s, manual %v", got.Status, got.ManualRetry)
	}
	if got := eventNow(t, b, billing); got.Status != queue.StatusDead || got.ManualRetry {
		t.Errorf("billing's delivery was changed by crm's group's retry: %s", got.Status)
	}
	if a := lastAudit(t, b, audit.RetryGroup); !strings.Contains(a.Target, "destination crm") {
		t.Errorf("audit target %q, want it to name destination crm", a.Target)
	}
}
