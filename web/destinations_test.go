package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/internal/store/tokens"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// With HOOKD_FORWARD_URL alone the page shows the one destination default,
// with no notice about a file.
func TestDestinations_ForwardURLAloneIsDefault(t *testing.T) {
	t.Parallel()
	b := setup(t)
	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "default", Source: "forward_url", URL: "http://app.internal/stripe"})
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusDead})
	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	r := c.get("/destinations")
	wantStatus(t, r, http.StatusOK)
	rows := r.doc.Find(`[data-testid="destination"]`)
	if rows.Length() != 1 || testid(r.doc, "destination-name") != "default" || testid(r.doc, "destination-dead") != "1" {
		t.Fatalf("rows %d, name %q, dead %q; want default alone, 1 dead", rows.Length(), testid(r.doc, "destination-name"), testid(r.doc, "destination-dead"))
	}
	if testid(r.doc, "destinations-from-file") != "" {
		t.Error("the file's notice shows without a file")
	}
	if r.doc.Find(`form[action="/destinations/default/pause"]`).Length() != 0 {
		t.Error("a viewer is offered the pause form")
	}
	if r.doc.Find(`nav a[href="/destinations"][aria-current="page"]`).Length() != 1 {
		t.Error("the nav does not mark Destinations as the current page")
	}
}

// An operator pauses one destination and resumes it: the page says who
// paused it and why, the other destination keeps delivering, and both
// are audited. A viewer may do neither.
func TestDestinations_PauseAndResume(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, name := range []string{"billing", "crm"} {
		queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: name, Route: `{"types":["invoice.*"],"livemode":"live"}`})
	}
	viewer := b.client(t)
	viewer.signIn(accounts.RoleViewer)
	viewer.get("/destinations")
	wantStatus(t, viewer.post("/destinations/billing/pause", url.Values{"reason": {"curious"}}), http.StatusForbidden)

	op := b.client(t)
	op.signIn(accounts.RoleOperator)
	page := op.get("/destinations")
	if notice := testid(page.doc, "destinations-from-file"); !strings.Contains(notice, "edit the file and send SIGHUP") {
		t.Errorf("notice %q, want it to say to edit the file and send SIGHUP", notice)
	}
	if route := page.doc.Find(`[data-testid="destination-route"]`).First().Text(); route != "invoice.*; live mode only" {
		t.Errorf("route %q", route)
	}
	wantStatus(t, op.post("/destinations/billing/pause", url.Values{"reason": {""}}), http.StatusBadRequest)
	wantStatus(t, op.post("/destinations/nope/pause", url.Values{"reason": {"x"}}), http.StatusNotFound)
	page = op.follow(op.post("/destinations/billing/pause", url.Values{"reason": {"app deploy"}}))
	if flash := testid(page.doc, "flash"); !strings.Contains(flash, "billing paused") {
		t.Errorf("flash %q", flash)
	}
	billing := page.doc.Find(`[data-destination="billing"]`)
	if state := strings.TrimSpace(billing.Find(`[data-testid="destination-state"]`).Text()); state != "paused" {
		t.Errorf("billing is %q, want paused", state)
	}
	if by := billing.Find(`[data-testid="destination-paused"]`).Text(); !strings.Contains(by, "operator@example.com") || !strings.Contains(by, "app deploy") {
		t.Errorf("pause note %q, want who and why", by)
	}
	if state := strings.TrimSpace(page.doc.Find(`[data-destination="crm"] [data-testid="destination-state"]`).Text()); state != "delivering" {
		t.Errorf("crm is %q, want delivering", state)
	}
	page = op.follow(op.post("/destinations/billing/resume", nil))
	if state := strings.TrimSpace(page.doc.Find(`[data-destination="billing"] [data-testid="destination-state"]`).Text()); state != "delivering" {
		t.Errorf("billing after the resume is %q, want delivering", state)
	}
	if e := lastAudit(t, b, audit.DestinationPause); e.Target != "billing: app deploy" || e.Email != "operator@example.com" {
		t.Errorf("pause entry %+v", e)
	}
	if n := countAudit(t, b, audit.DestinationResume); n != 1 {
		t.Errorf("%d resume entries, want 1", n)
	}
}

// A retired destination's deliveries are moved to a configured one from
// its row, or dropped; a configured destination's cannot be.
func TestDestinations_MoveAndDropRetired(t *testing.T) {
	t.Parallel()
	b := setup(t)
	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "billing"})
	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "old", Retired: true})
	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "gone", Retired: true})
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_1", Destination: "old", Status: queue.StatusDead})
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_2", Destination: "gone", Status: queue.StatusDead})
	op := b.client(t)
	op.signIn(accounts.RoleOperator)
	page := op.get("/destinations")
	if page.doc.Find(`form[action="/destinations/billing/move"]`).Length() != 0 {
		t.Error("a configured destination offers the move form")
	}
	if opts := page.doc.Find(`form[action="/destinations/old/move"] option`); opts.Length() != 1 || opts.Text() != "billing" {
		t.Errorf("move targets %q, want billing alone", opts.Text())
	}
	wantStatus(t, op.post("/destinations/billing/drop", nil), http.StatusConflict)
	page = op.follow(op.post("/destinations/old/move", url.Values{"to": {"billing"}}))
	if flash := testid(page.doc, "flash"); flash != "Moved 1 delivery of old to billing." {
		t.Errorf("flash %q", flash)
	}
	page = op.follow(op.post("/destinations/gone/drop", nil))
	if flash := testid(page.doc, "flash"); flash != "Dropped 1 delivery of gone." {
		t.Errorf("flash %q", flash)
	}
	if dead := page.doc.Find(`[data-destination="billing"] [data-testid="destination-dead"]`).Text(); dead != "1" {
		t.Errorf("billing has %q dead, want the moved 1", dead)
	}
}

// GET /api/v1/destinations lists each destination with its state and
// counts; moving a configured destination's deliveries is a 409 that
// says why.
func TestAPI_Destinations(t *testing.T) {
	t.Parallel()
	b := setupActions(t)
	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "billing", Route: `{"types":["invoice.*"]}`})
	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "old", Retired: true})
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Destination: "old", Status: queue.StatusDead})
	c, _ := b.token(t, accounts.RoleOperator, tokens.ScopeOperate, "runbook")
	var list struct {
		Destinations []struct {
			Name, State string
			Dead        int64
			Route       map[string]any
		}
	}
	c.call(http.MethodGet, "/destinations", nil).want(t, http.StatusOK).decode(t, &list)
	if len(list.Destinations) != 2 || list.Destinations[0].Name != "billing" || list.Destinations[0].State != "delivering" ||
		list.Destinations[1].State != "retired" || list.Destinations[1].Dead != 1 || list.Destinations[0].Route["types"] == nil {
		t.Fatalf("destinations %+v", list.Destinations)
	}
	var events struct {
		Events []struct{ Destination string }
		Total  int64
	}
	c.call(http.MethodGet, "/events?status=dead&destination=old", nil).want(t, http.StatusOK).decode(t, &events)
	if events.Total != 1 || len(events.Events) != 1 || events.Events[0].Destination != "old" {
		t.Errorf("dead deliveries to old: %+v, want the one", events)
	}
	c.call(http.MethodGet, "/events?status=dead&destination=billing", nil).want(t, http.StatusOK).decode(t, &events)
	if events.Total != 0 {
		t.Errorf("%d dead deliveries to billing, want 0", events.Total)
	}
	p := c.call(http.MethodPost, "/destinations/billing/move", map[string]any{"to": "old"}).want(t, http.StatusConflict).problem(t)
	if !strings.Contains(p.Detail, "only a retired destination's deliveries") {
		t.Errorf("detail %q", p.Detail)
	}
	c.call(http.MethodPost, "/destinations/nope/pause", map[string]any{"reason": "x"}).want(t, http.StatusNotFound)
}

// An event delivered to one destination and dead at another shows each
// destination's delivery and attempts apart, with a retry for the dead
// one; retrying it leaves the other's alone.
func TestEventPage_EachDestinationsDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dead := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_fan", Destination: "crm", Status: queue.StatusDead, Attempts: 5})
	queuetest.InsertAttempt(t, b.pool, queue.NewAttempt{Source: "stripe", EventID: "evt_fan", Destination: "billing", Succeeded: true,
		HTTPStatus: 200, Path: queue.PathInline})
	queuetest.InsertAttempt(t, b.pool, queue.NewAttempt{Source: "stripe", EventID: "evt_fan", Destination: "crm",
		HTTPStatus: 500, Error: "downstream returned 500", Path: queue.PathInline})
	op := b.client(t)
	op.signIn(accounts.RoleOperator)
	page := op.get("/events/evt_fan")
	wantStatus(t, page, http.StatusOK)
	deliveries := page.doc.Find(`[data-testid="delivery"]`)
	if deliveries.Length() != 2 {
		t.Fatalf("%d deliveries shown, want billing's and crm's", deliveries.Length())
	}
	billing, crm := deliveries.Eq(0), deliveries.Eq(1)
	if name, _ := billing.Attr("data-destination"); name != "billing" || strings.TrimSpace(billing.Find(`[data-testid="delivery-state"]`).Text()) != "delivered" {
		t.Errorf("first delivery %q %q, want billing delivered", name, billing.Find(`[data-testid="delivery-state"]`).Text())
	}
	if billing.Find(`form`).Length() != 0 || billing.Find(`[data-testid="attempt-row"]`).Length() != 1 {
		t.Error("billing's delivery: want its one attempt and no retry")
	}
	if crm.Find(`[data-testid="attempt-row"]`).Length() != 1 || crm.Find(`[data-testid="delivery-state"]`).Text() != "dead" {
		t.Errorf("crm's delivery: %q", crm.Text())
	}
	form := crm.Find(`form[action="/events/` + dead.ID.String() + `/retry"]`)
	if form.Length() != 1 {
		t.Fatal("crm's dead delivery offers no retry")
	}
	op.post("/events/"+dead.ID.String()+"/retry", formValues(form))
	if e, err := b.store.Event(t.Context(), dead.ID); err != nil || e.Status != queue.StatusFailed {
		t.Errorf("crm's delivery after the retry: %s, %v; want waiting to retry", e.Status, err)
	}
}

// The dead and pending lists and the failures page name each delivery's
// destination and filter by it; a failure group's retry from a filtered
// page retries that destination's deliveries only.
func TestLists_FilterByDestination(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, name := range []string{"billing", "crm"} {
		queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: name})
	}
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_1", Destination: "billing", Status: queue.StatusDead})
	crmDead := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_1", Destination: "crm", Status: queue.StatusDead})
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_2", Destination: "crm"})
	op := b.client(t)
	op.signIn(accounts.RoleOperator)

	dead := op.get("/events?status=dead&destination=crm")
	rows := dead.doc.Find(`[data-testid="event-row"]`)
	if rows.Length() != 1 || strings.TrimSpace(rows.Find(`[data-testid="event-destination"]`).Text()) != "crm" {
		t.Errorf("dead to crm: %d rows (%q), want crm's 1", rows.Length(), rows.Text())
	}
	if sel, _ := dead.doc.Find(`#f-destination option[selected]`).Attr("value"); sel != "crm" {
		t.Errorf("the filter shows %q chosen, want crm", sel)
	}
	if n := op.get("/events?status=pending&destination=billing").doc.Find(`[data-testid="event-row"]`).Length(); n != 0 {
		t.Errorf("%d pending to billing, want 0", n)
	}
	if n := op.get("/events?status=dead").doc.Find(`[data-testid="event-row"]`).Length(); n != 2 {
		t.Errorf("%d dead unfiltered, want 2", n)
	}

	// One error at two destinations is a group each.
	failures := op.get("/failures")
	var groups []string
	failures.doc.Find(`[data-testid="failure-group"]`).Each(func(_ int, g *goquery.Selection) {
		d, _ := g.Attr("data-destination")
		groups = append(groups, d)
	})
	if strings.Join(groups, ",") != "billing,crm" && strings.Join(groups, ",") != "crm,billing" {
		t.Errorf("the failure groups are of %v, want one of billing and one of crm", groups)
	}
	failures = op.get("/failures?destination=crm")
	if dead := testid(failures.doc, "failure-dead"); dead != "1" {
		t.Errorf("the group filtered to crm has %q dead, want 1", dead)
	}
	form := failures.doc.Find(`form[action="/failures/retry/preview"]`)
	confirm := op.post("/failures/retry/preview", formValues(form))
	if d := testid(confirm.doc, "retry-group-destination"); d != "crm" {
		t.Errorf("the confirmation says %q, want crm", d)
	}
	op.post("/failures/retry", formValues(confirm.doc.Find(`form[action="/failures/retry"]`)))
	if e, _ := b.store.Event(t.Context(), crmDead.ID); e.Status == queue.StatusDead {
		t.Error("crm's dead delivery is still dead after its group's retry")
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_events WHERE destination = 'billing' AND status = 'dead'`); n != 1 {
		t.Errorf("%d of billing's deliveries dead, want its 1 untouched", n)
	}
}

// A replay's form chooses one destination to deliver to; the replay's
// page says which. A replay to a destination that does not exist is
// refused, saying why.
func TestReplays_ToOneDestination(t *testing.T) {
	t.Parallel()
	b := setup(t)
	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "analytics"})
	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "old", Retired: true})
	queuetest.InsertLogged(t, b.pool, []queuetest.LoggedOpts{{}, {}})
	op := b.client(t)
	op.signIn(accounts.RoleOperator)
	page := op.get("/replays")
	if opts := page.doc.Find(`#replay-destination option`); opts.Length() != 3 {
		t.Errorf("%d choices of destination, want every one, analytics and old", opts.Length())
	}
	form := formValues(page.doc.Find(`form[action="/replays/preview"]`))
	form.Set("status", "processed")
	form.Set("destination", "old")
	if r := op.post("/replays/preview", form); r.status != http.StatusBadRequest ||
		!strings.Contains(testid(r.doc, "replay-problem"), "retired") {
		t.Errorf("preview to a retired destination: %d %q", r.status, testid(r.doc, "replay-problem"))
	}
	form.Set("destination", "analytics")
	preview := op.post("/replays/preview", form)
	wantStatus(t, preview, http.StatusOK)
	start := formValues(preview.doc.Find(`form[action="/replays"]`))
	if start.Get("destination") != "analytics" {
		t.Fatalf("the start form carries destination %q", start.Get("destination"))
	}
	start.Set("name", "backfill analytics")
	detail := op.follow(op.post("/replays", start))
	if d := testid(detail.doc, "replay-destination"); !strings.Contains(d, "analytics alone") {
		t.Errorf("the replay's page says %q, want it delivers to analytics alone", d)
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM replays WHERE destination = 'analytics' AND total = 2`); n != 1 {
		t.Errorf("%d replays of 2 events to analytics, want 1", n)
	}
}

// A destination whose retry loop narrowed its claims, every retry of a
// turn having failed, says so on its row, and its due deliveries count
// as waiting their turn on the overview, not stuck; once a retry succeeds
// neither holds.
func TestDestinations_NarrowedRetriesAreShownAndNotStuck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, name := range []string{"billing", "crm"} {
		queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: name})
	}
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Destination: "billing", DueIn: -10 * time.Minute})
	if err := b.store.MarkRetriesNarrowed(t.Context(), "billing", true); err != nil {
		t.Fatal(err)
	}
	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	page := c.get("/destinations")
	if note := page.doc.Find(`[data-destination="billing"] [data-testid="destination-retries-narrowed"]`).Text(); !strings.Contains(note, "one at a time") {
		t.Errorf("billing's note %q, want that its retries go one at a time", note)
	}
	if n := page.doc.Find(`[data-destination="crm"] [data-testid="destination-retries-narrowed"]`).Length(); n != 0 {
		t.Error("crm, whose retries succeed, says they are narrowed")
	}
	if stuck := testid(c.get("/").doc, "count-stuck"); stuck != "0" {
		t.Errorf("stuck while billing's retries are narrowed: %q, want 0", stuck)
	}

	if err := b.store.MarkRetriesNarrowed(t.Context(), "billing", false); err != nil {
		t.Fatal(err)
	}
	if n := c.get("/destinations").doc.Find(`[data-testid="destination-retries-narrowed"]`).Length(); n != 0 {
		t.Error("the note stays once a retry succeeded")
	}
	if stuck := testid(c.get("/").doc, "count-stuck"); stuck != "1" {
		t.Errorf("stuck once billing's retries are whole again: %q, want 1", stuck)
	}
}
