package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/internal/store/tokens"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web"
)

// The destinations page shows an ordered destination's rate, order_by and
// held keys to a viewer, with no release; an operator's release asks to
// confirm, then is made and audited; a key nothing holds is a 409 that
// says why.
func TestDestinations_HeldKeysAndTheirRelease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "billing",
		Route: `{"types":["invoice.*"],"rate":20,"order_by":"data.object.customer"}`})
	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "crm"})
	dead := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Destination: "billing", OrderKey: "cus_a", Status: queue.StatusDead})
	for range 3 {
		queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Destination: "billing", OrderKey: "cus_a"})
	}

	viewer := b.client(t)
	viewer.signIn(accounts.RoleViewer)
	page := viewer.get("/destinations")
	wantStatus(t, page, http.StatusOK)
	billing := page.doc.Find(`tr[data-testid="destination"][data-destination="billing"]`)
	if rate := strings.TrimSpace(billing.Find(`[data-testid="destination-rate-limit"]`).Text()); rate != "at most 20 calls a second, over every replica" {
		t.Errorf("billing's rate %q", rate)
	}
	if o := billing.Find(`[data-testid="destination-order-by"]`).Text(); !strings.Contains(o, "data.object.customer") {
		t.Errorf("billing's order_by %q", o)
	}
	if rate := strings.TrimSpace(page.doc.Find(`[data-destination="crm"] [data-testid="destination-rate-limit"]`).Text()); rate != "no rate limit" {
		t.Errorf("crm's rate %q", rate)
	}
	key := page.doc.Find(`tr[data-testid="held-key"][data-key="cus_a"]`)
	if key.Length() != 1 || strings.TrimSpace(key.Find(`[data-testid="held-key-waiting"]`).Text()) != "3" ||
		strings.TrimSpace(key.Find(`[data-testid="held-key-event"]`).Text()) != dead.EventID {
		t.Fatalf("held key row %q, want cus_a held by %s with 3 waiting", key.Text(), dead.EventID)
	}
	if page.doc.Find(`form[action="/destinations/billing/release/preview"]`).Length() != 0 {
		t.Error("a viewer is offered the release")
	}
	wantStatus(t, viewer.post("/destinations/billing/release", url.Values{"key": {"cus_a"}}), http.StatusForbidden)

	op := b.client(t)
	op.signIn(accounts.RoleOperator)
	op.get("/destinations")
	confirm := op.post("/destinations/billing/release/preview", url.Values{"key": {"cus_a"}})
	wantStatus(t, confirm, http.StatusOK)
	if w := testid(confirm.doc, "release-waiting"); w != "3 deliveries wait" {
		t.Errorf("the confirmation says %q wait, want 3 deliveries", w)
	}
	if countAudit(t, b, audit.OrderRelease) != 0 {
		t.Fatal("the confirmation released the key")
	}
	refused := op.post("/destinations/billing/release", url.Values{"key": {"cus_b"}})
	wantStatus(t, refused, http.StatusConflict)
	if !strings.Contains(refused.body, "is not held") {
		t.Errorf("the 409 does not say why: %q", refused.body)
	}
	page = op.follow(op.post("/destinations/billing/release", url.Values{"key": {"cus_a"}, "reason": {"skipped"}}))
	if flash := testid(page.doc, "flash"); !strings.Contains(flash, "Released key cus_a of billing: "+dead.EventID+" stays dead") {
		t.Errorf("flash %q", flash)
	}
	if page.doc.Find(`[data-testid="held-keys"]`).Length() != 0 {
		t.Error("the released key is still listed")
	}
	if e := lastAudit(t, b, audit.OrderRelease); e.Target != "billing key cus_a: "+dead.EventID+": skipped" || e.Count != 1 ||
		e.Email != "operator@example.com" {
		t.Errorf("release entry %+v", e)
	}
}

// GET /api/v1/destinations/{name}/held-keys lists a destination's held
// keys; a missing destination is a 404.
func TestAPI_HeldKeys(t *testing.T) {
	t.Parallel()
	b := setupActions(t)
	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "billing"})
	dead := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Destination: "billing", OrderKey: "cus_a", Status: queue.StatusDead})
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Destination: "billing", OrderKey: "cus_a"})
	c, _ := b.token(t, accounts.RoleViewer, tokens.ScopeRead, "dashboards")
	var list struct {
		HeldKeys []struct {
			Key     string `json:"key"`
			EventID string `json:"event_id"`
			Waiting int    `json:"waiting"`
		} `json:"held_keys"`
	}
	c.call(http.MethodGet, "/destinations/billing/held-keys", nil).want(t, http.StatusOK).decode(t, &list)
	if len(list.HeldKeys) != 1 || list.HeldKeys[0].Key != "cus_a" || list.HeldKeys[0].EventID != dead.EventID || list.HeldKeys[0].Waiting != 1 {
		t.Errorf("held keys %+v, want cus_a held by %s with 1 waiting", list.HeldKeys, dead.EventID)
	}
	c.call(http.MethodGet, "/destinations/nope/held-keys", nil).want(t, http.StatusNotFound)
}

// A destination with no rate of its own is delivered at HOOKD_FORWARD_RATE,
// and its row says so; one with its own rate shows that.
func TestDestinations_RateDefaultsToForwardRate(t *testing.T) {
	t.Parallel()
	b := setup(t, withOptions(web.Options{Destinations: actions.ManagedDestinations{ForwardRate: 5}}))
	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "billing", Route: `{"types":["*"],"rate":20}`})
	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "crm"})
	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	page := c.get("/destinations")
	for name, want := range map[string]string{
		"billing": "at most 20 calls a second, over every replica",
		"crm":     "at most 5 calls a second, over every replica (HOOKD_FORWARD_RATE)",
	} {
		if got := strings.TrimSpace(page.doc.Find(`[data-destination="` + name + `"] [data-testid="destination-rate-limit"]`).Text()); got != want {
			t.Errorf("%s's rate %q, want %q", name, got, want)
		}
	}
}
