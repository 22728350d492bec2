package web_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/internal/destinations"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/internal/store/tokens"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web"
	"github.com/hookd/hookd/web/api"
)

var (
	formSecret    = "whsec_" + base64.StdEncoding.EncodeToString([]byte("the billing app's key"))
	formOldSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("the billing app's old key"))
)

func destinationsKey(t *testing.T) []byte {
	t.Helper()
	key := make([]byte, destinations.KeySize)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return key
}

// setupDestinations serves the dashboard, and /api/v1, with cfg.
func setupDestinations(t *testing.T, cfg actions.ManagedDestinations) *testBundle {
	t.Helper()
	return setup(t, withOptions(web.Options{Destinations: cfg}), withAPI(lots))
}

// billingForm is the add form as an admin fills it in.
func billingForm() url.Values {
	return url.Values{"name": {"billing"}, "url": {"https://billing.internal/stripe"}, "types": {"invoice.*, customer.created"},
		"livemode": {"live"}, "accounts": {""}, "endpoints": {""}, "filter": {"data.object.amount >= 1000"},
		"concurrency": {"4"}, "timeout": {"10s"}, "rate": {"2.5"}, "order_by": {"data.object.customer"}, "signing_secrets": {formSecret + "\n" + formOldSecret},
		"headers": {"Authorization: Bearer billing-token-42\nX-Team: billing"}}
}

// plaintextRows counts the destinations rows holding s in the clear, in
// any column, the sealed ones read as text.
func plaintextRows(t *testing.T, b *testBundle, s string) int64 {
	t.Helper()
	return queuetest.Count(t, b.pool, `SELECT count(*) FROM destinations d
		WHERE d::text LIKE '%' || $1 || '%' OR encode(coalesce(signing_secrets_sealed, ''), 'escape') LIKE '%' || $1 || '%'
		   OR encode(coalesce(headers_sealed, ''), 'escape') LIKE '%' || $1 || '%'`, s)
}

// An admin adds a destination with its secrets and headers, which are
// kept sealed and never shown again; edits it, the secrets kept unless
// typed; and removes it, the confirmation saying it is deleted. Each
// change is audited, naming what changed and no secret.
func TestDestinationForm_AddEditRemove(t *testing.T) {
	t.Parallel()
	key := destinationsKey(t)
	b := setupDestinations(t, actions.ManagedDestinations{Key: key})
	admin := b.client(t)
	admin.signIn(accounts.RoleAdmin)
	ctx := context.Background()

	page := admin.get("/destinations/add")
	wantStatus(t, page, http.StatusOK)
	if page.doc.Find(`form[action="/destinations/add"] textarea[name="signing_secrets"]`).Length() != 1 {
		t.Fatalf("the add form has no signing secrets field:\n%s", page.body)
	}
	r := admin.post("/destinations/add", billingForm())
	wantStatus(t, r, http.StatusSeeOther)
	if loc := r.header.Get("Location"); loc != "/destinations/billing/edit" {
		t.Errorf("after the add: Location %q", loc)
	}
	edit := admin.follow(r)
	wantStatus(t, edit, http.StatusOK)
	for _, secret := range []string{formSecret, formOldSecret, "billing-token-42", "X-Team"} {
		if strings.Contains(edit.body, secret) {
			t.Errorf("the edit page shows %q", secret)
		}
	}
	for _, secret := range []string{"whsec_", "billing-token-42", "X-Team", "Authorization"} {
		if n := plaintextRows(t, b, secret); n != 0 {
			t.Errorf("%q is in the destinations table in the clear", secret)
		}
	}
	if got := testid(edit.doc, "secrets-state"); !strings.HasPrefix(got, "Now: set.") {
		t.Errorf("secrets state %q", got)
	}
	for field, want := range map[string]string{"types": "invoice.*, customer.created", "rate": "2.5",
		"order_by": "data.object.customer"} {
		if got, _ := edit.doc.Find(`input[name="` + field + `"]`).Attr("value"); got != want {
			t.Errorf("%s on the edit form: %q, want %q", field, got, want)
		}
	}
	set, err := b.store.ManagedSet(ctx, "", key)
	if err != nil {
		t.Fatal(err)
	}
	d := set.Get("billing")
	if d == nil || len(d.SigningSecrets) != 2 || d.SigningSecrets[0] != formSecret || d.Headers.Get("Authorization") != "Bearer billing-token-42" ||
		d.Headers.Get("X-Team") != "billing" || d.Livemode != "live" || d.Concurrency != 4 || d.Rate != 2.5 ||
		d.OrderBy != "data.object.customer" {
		t.Fatalf("billing as the runtime reads it: %+v", d)
	}
	if e := lastAudit(t, b, audit.DestinationAdd); e.Target != "billing (https://billing.internal/stripe)" || e.Email != "admin@example.com" {
		t.Errorf("the add's entry: %+v", e)
	}

	// Saved as shown: secrets typed nowhere are kept, headers removed.
	form := formValues(edit.doc.Find(`form[action="/destinations/billing/edit"]`))
	form.Set("livemode", "live")
	form.Set("filter", "data.object.amount >= 5000")
	form.Set("rate", "")
	form.Set("remove_headers", "1")
	form.Del("remove_signing_secrets")
	r = admin.post("/destinations/billing/edit", form)
	wantStatus(t, r, http.StatusSeeOther)
	edit = admin.follow(r)
	if got := testid(edit.doc, "headers-state"); !strings.HasPrefix(got, "Now: not set.") {
		t.Errorf("headers state after removing them: %q", got)
	}
	if !strings.Contains(edit.body, "filter, rate, headers changed") {
		t.Errorf("the flash does not say what changed:\n%s", edit.body)
	}
	set, err = b.store.ManagedSet(ctx, "", key)
	if err != nil {
		t.Fatal(err)
	}
	if d := set.Get("billing"); len(d.SigningSecrets) != 2 || len(d.Headers) != 0 || d.Filter != "data.object.amount >= 5000" ||
		d.Rate != 0 || d.OrderBy != "data.object.customer" {
		t.Errorf("billing after the edit: %+v", d)
	}
	if e := lastAudit(t, b, audit.DestinationEdit); e.Target != "billing: filter, rate, headers" {
		t.Errorf("the edit's entry: %+v", e)
	}

	confirm := admin.post("/destinations/billing/remove/preview", nil)
	wantStatus(t, confirm, http.StatusOK)
	if testid(confirm.doc, "removal-deletes") == "" {
		t.Errorf("the confirmation does not say billing is deleted:\n%s", confirm.body)
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM destinations`); n != 1 {
		t.Fatalf("the confirmation changed the destinations: %d rows", n)
	}
	if edit.doc.Find(`a[href="/destinations/add"]`).Length() != 1 {
		t.Errorf("the edit page has no link to add a destination")
	}
	list := admin.get("/destinations")
	if list.doc.Find(`a[href="/destinations/add"]`).Length() != 1 || list.doc.Find(`a[href="/destinations/billing/edit"]`).Length() != 1 {
		t.Errorf("the destinations page does not lead to the add form and billing's edit form:\n%s", list.body)
	}
	r = admin.post("/destinations/billing/remove", nil)
	wantStatus(t, r, http.StatusSeeOther)
	if loc := r.header.Get("Location"); loc != "/destinations" {
		t.Errorf("after the removal: Location %q, want the destinations page", loc)
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM destinations`); n != 0 {
		t.Errorf("billing is still there: %d rows", n)
	}
	if e := lastAudit(t, b, audit.DestinationRemove); e.Target != "billing: deleted, nothing waiting" {
		t.Errorf("the removal's entry: %+v", e)
	}
	for _, e := range auditEntries(t, b) {
		if strings.Contains(e.Target, "whsec_") || strings.Contains(e.Target, "billing-token") {
			t.Errorf("an audit entry names a secret: %+v", e)
		}
	}
}

// A destination with a delivery waiting is kept retired on removal, and
// the confirmation says so first.
func TestDestinationForm_RemovalRetiresWhatWaits(t *testing.T) {
	t.Parallel()
	b := setupDestinations(t, actions.ManagedDestinations{})
	admin := b.client(t)
	admin.signIn(accounts.RoleAdmin)
	admin.get("/destinations/add")
	wantStatus(t, admin.post("/destinations/add", url.Values{"name": {"crm"}, "url": {"http://crm.internal"}}), http.StatusSeeOther)
	fe := queue.FailedEvent{Source: queue.SourceStripe, EventID: "evt_1", EventType: "invoice.paid",
		Payload: []byte(`{"id":"evt_1"}`), Error: "HTTP 500", Destination: "crm"}
	if _, err := queuetest.NewSeed(b.store).Enqueue(context.Background(), fe); err != nil {
		t.Fatal(err)
	}
	admin.get("/destinations/crm/edit")
	confirm := admin.post("/destinations/crm/remove/preview", nil)
	wantStatus(t, confirm, http.StatusOK)
	if got := testid(confirm.doc, "removal-retires"); !strings.HasPrefix(got, "One delivery waits") {
		t.Errorf("the confirmation: %q", got)
	}
	wantStatus(t, admin.post("/destinations/crm/remove", nil), http.StatusSeeOther)
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM destinations WHERE name = 'crm' AND retired_at IS NOT NULL`); n != 1 {
		t.Errorf("crm is not kept retired")
	}
	if e := lastAudit(t, b, audit.DestinationRemove); e.Target != "crm: retired, 1 deliveries waiting" {
		t.Errorf("the removal's entry: %+v", e)
	}
	// Retired, it is no longer edited or removed here.
	if r := admin.get("/destinations/crm/edit"); r.status != http.StatusConflict || !strings.Contains(r.body, "crm is retired") {
		t.Errorf("the edit page of a retired destination: %d\n%s", r.status, r.body)
	}
}

// Every refusal says the field, as a destinations file's does, marks its
// input, keeps what was typed but the secrets, and writes nothing.
func TestDestinationForm_RefusalsNameTheField(t *testing.T) {
	t.Parallel()
	b := setupDestinations(t, actions.ManagedDestinations{Key: destinationsKey(t), Endpoints: []string{"default", "connect"},
		ForwardURL: "https://app.example/hook"})
	admin := b.client(t)
	admin.signIn(accounts.RoleAdmin)
	admin.get("/destinations/add")
	for _, tc := range []struct {
		field, value, want string
	}{
		{"name", "Billing", `Not added: the destination: name: "Billing" does not match`},
		{"name", "default", "Not added: default is HOOKD_FORWARD_URL's destination"},
		{"url", "ftp://billing.internal", `Not added: destination "billing": url: "ftp://billing.internal" is not http or https.`},
		{"url", "https://user:pw@billing.internal", `destination "billing": url: holds a user or a password`},
		{"types", "invoice.[a]", `destination "billing": types: bad glob "invoice.[a]"`},
		{"livemode", "both", `destination "billing": livemode: "both" is not live, test or any`},
		{"accounts", "cus_1", `destination "billing": accounts: "cus_1" is not platform`},
		{"endpoints", "eu", `destination "billing": endpoints: "eu" is no endpoint's label (hookd serves default, connect)`},
		{"filter", "data.object.amount >=", `destination "billing": filter: `},
		{"concurrency", "many", `destination "billing": concurrency: "many" is not a whole number.`},
		{"timeout", "10", `destination "billing": timeout: "10" is not a duration like 10s or 1m30s`},
		{"rate", "fast", `destination "billing": rate: "fast" is not a number of calls a second, like 20 or 0.5.`},
		{"rate", "-2", `destination "billing": rate: -2 is not a number of calls a second greater than zero`},
		{"order_by", "data.object..customer", `destination "billing": order_by: "data.object..customer" is not a field path like data.object.customer`},
		{"signing_secrets", "whsec_!!", `destination "billing": signing_secrets: secret 1 of 1: the part after whsec_ is not valid base64`},
		{"headers", "Authorization Bearer x", `destination "billing": headers: line 1 is not Name: value.`},
		{"headers", "Webhook-Signature: x", `destination "billing": headers: Webhook-Signature: hookd sets this header itself`},
	} {
		form := billingForm()
		form.Set(tc.field, tc.value)
		r := admin.post("/destinations/add", form)
		if r.status != http.StatusUnprocessableEntity && r.status != http.StatusConflict {
			t.Errorf("%s=%q: status %d, want 422 or 409", tc.field, tc.value, r.status)
			continue
		}
		if got := r.doc.Find("#destination-error").Text(); !strings.Contains(got, tc.want) {
			t.Errorf("%s=%q: error %q, want %q", tc.field, tc.value, got, tc.want)
		}
		if r.status == http.StatusUnprocessableEntity && tc.field != "livemode" {
			if inv, _ := r.doc.Find(`[name="` + tc.field + `"]`).Attr("aria-invalid"); inv != "true" {
				t.Errorf("%s=%q: its input is not marked invalid", tc.field, tc.value)
			}
		}
		if v, _ := r.doc.Find(`input[name="url"]`).Attr("value"); tc.field != "url" && v != "https://billing.internal/stripe" {
			t.Errorf("%s=%q: the URL typed is not kept: %q", tc.field, tc.value, v)
		}
		if strings.Contains(r.body, "billing-token-42") || strings.Contains(r.body, formSecret) {
			t.Errorf("%s=%q: the page sends a secret back", tc.field, tc.value)
		}
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM destinations`); n != 0 {
		t.Errorf("%d destinations written by refused forms", n)
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM audit_log WHERE action LIKE 'destination_%'`); n != 0 {
		t.Errorf("%d audit entries of refused forms", n)
	}
}

// Without HOOKD_DESTINATIONS_KEY the form offers no secret and says why;
// a destination with a secret is refused saying the key is missing, one
// without is added.
func TestDestinationForm_NoKeyNoSecrets(t *testing.T) {
	t.Parallel()
	b := setupDestinations(t, actions.ManagedDestinations{})
	admin := b.client(t)
	admin.signIn(accounts.RoleAdmin)
	page := admin.get("/destinations/add")
	if testid(page.doc, "destinations-no-key") == "" || page.doc.Find(`textarea[name="signing_secrets"]`).Length() != 0 {
		t.Errorf("the add form without a key:\n%s", page.body)
	}
	for field, value := range map[string]string{"signing_secrets": formSecret, "headers": "Authorization: Bearer x"} {
		r := admin.post("/destinations/add", url.Values{"name": {"billing"}, "url": {"http://billing.internal"}, field: {value}})
		wantStatus(t, r, http.StatusUnprocessableEntity)
		if got := r.doc.Find("#destination-error").Text(); !strings.Contains(got, `destination "billing": `+field+": not kept without HOOKD_DESTINATIONS_KEY") {
			t.Errorf("%s without a key: %q", field, got)
		}
	}
	wantStatus(t, admin.post("/destinations/add", url.Values{"name": {"billing"}, "url": {"http://billing.internal"}}), http.StatusSeeOther)
}

// While HOOKD_DESTINATIONS_FILE is set the pages say so and offer no
// form, and a post changes nothing.
func TestDestinationForm_ReadOnlyWithAFile(t *testing.T) {
	t.Parallel()
	b := setupDestinations(t, actions.ManagedDestinations{File: "/etc/hookd/destinations.yaml", Key: destinationsKey(t)})
	admin := b.client(t)
	admin.signIn(accounts.RoleAdmin)
	page := admin.get("/destinations/add")
	wantStatus(t, page, http.StatusOK)
	if !strings.Contains(testid(page.doc, "destinations-read-only"), "/etc/hookd/destinations.yaml") ||
		page.doc.Find(`input[name="url"]`).Length() != 0 {
		t.Errorf("the add page with a file:\n%s", page.body)
	}
	r := admin.post("/destinations/add", billingForm())
	wantStatus(t, r, http.StatusConflict)
	if testid(r.doc, "destinations-read-only") == "" {
		t.Errorf("the refused add does not say why:\n%s", r.body)
	}
	wantStatus(t, admin.post("/destinations/billing/remove", nil), http.StatusConflict)
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM destinations`); n != 0 {
		t.Errorf("%d destinations written with a file set", n)
	}
	// A forged post without the page's CSRF token changes nothing either.
	open := setupDestinations(t, actions.ManagedDestinations{})
	other := open.client(t)
	other.signIn(accounts.RoleAdmin)
	form := billingForm()
	form.Set("_csrf", "forged")
	if r := other.post("/destinations/add", form); r.status != http.StatusForbidden {
		t.Errorf("a forged add: status %d, want 403", r.status)
	}
	if n := queuetest.Count(t, open.pool, `SELECT count(*) FROM destinations`); n != 0 {
		t.Errorf("a forged add wrote %d destinations", n)
	}
}

// The API adds, edits and removes a destination as the forms do: a
// refused field is a 400 naming it, secrets are never returned, and an
// edit that gives none keeps them.
func TestAPI_ManagedDestinations(t *testing.T) {
	t.Parallel()
	key := destinationsKey(t)
	b := setupDestinations(t, actions.ManagedDestinations{Key: key})
	secret, _ := b.apiToken(t, accounts.RoleAdmin, tokens.ScopeAdmin, "ops")
	c := b.api(t, secret)
	ctx := context.Background()

	p := c.call(http.MethodPost, "/destinations", map[string]any{"name": "billing", "url": "https://billing.internal",
		"filter": "data.object.amount >="}).want(t, http.StatusBadRequest).problem(t)
	if p.Errors == nil || len(*p.Errors) != 1 || (*p.Errors)[0].Field != "filter" {
		t.Errorf("a bad filter: %+v", p)
	}
	for field, value := range map[string]any{"rate": -1, "order_by": "data.object."} {
		p := c.call(http.MethodPost, "/destinations", map[string]any{"name": "billing", "url": "https://billing.internal",
			field: value}).want(t, http.StatusBadRequest).problem(t)
		if p.Errors == nil || len(*p.Errors) != 1 || (*p.Errors)[0].Field != field {
			t.Errorf("a bad %s: %+v", field, p)
		}
	}
	var added api.ManagedDestination
	c.call(http.MethodPost, "/destinations", map[string]any{"name": "billing", "url": "https://billing.internal",
		"types": []string{"invoice.*"}, "signing_secrets": []string{formSecret}, "headers": map[string]string{"Authorization": "Bearer b"},
		"rate": 2.5, "order_by": "data.object.customer",
	}).want(t, http.StatusCreated).decode(t, &added)
	if !added.SigningSecretsSet || !added.HeadersSet || added.Source != "dashboard" || len(added.Types) != 1 ||
		added.Rate != 2.5 || added.OrderBy != "data.object.customer" {
		t.Errorf("added: %+v", added)
	}
	c.call(http.MethodPost, "/destinations", map[string]any{"name": "billing", "url": "https://other.internal"}).want(t, http.StatusConflict)

	var changed api.ManagedDestinationChange
	c.call(http.MethodPost, "/destinations/billing/edit", map[string]any{"url": "https://billing.internal/v2", "types": []string{"invoice.*"}}).
		want(t, http.StatusOK).decode(t, &changed)
	if !slices.Equal(changed.Changed, []string{"url", "rate", "order_by"}) || !changed.Destination.SigningSecretsSet ||
		changed.Destination.Rate != 0 || changed.Destination.OrderBy != "" {
		t.Errorf("an edit of the URL, without a rate or an order_by: %+v", changed)
	}
	c.call(http.MethodPost, "/destinations/billing/edit", map[string]any{"url": "https://billing.internal/v2", "signing_secrets": []string{}}).
		want(t, http.StatusOK).decode(t, &changed)
	if changed.Destination.SigningSecretsSet || !changed.Destination.HeadersSet {
		t.Errorf("the secrets cleared: %+v", changed.Destination)
	}
	set, err := b.store.ManagedSet(ctx, "", key)
	if err != nil || set.Get("billing").Headers.Get("Authorization") != "Bearer b" || len(set.Get("billing").SigningSecrets) != 0 {
		t.Errorf("billing as the runtime reads it: %v, %+v", err, set)
	}
	c.call(http.MethodPost, "/destinations/nobody/edit", map[string]any{"url": "https://x.internal"}).want(t, http.StatusNotFound)

	var removal api.DestinationRemoval
	c.call(http.MethodPost, "/destinations/billing/remove", map[string]any{"dry_run": true}).want(t, http.StatusOK).decode(t, &removal)
	if removal.Removed || removal.Retired || removal.Waiting != 0 {
		t.Errorf("the dry run: %+v", removal)
	}
	c.call(http.MethodPost, "/destinations/billing/remove", nil).want(t, http.StatusOK).decode(t, &removal)
	if !removal.Removed {
		t.Errorf("the removal: %+v", removal)
	}
	if e := lastAudit(t, b, audit.DestinationRemove); e.TokenName != "ops" {
		t.Errorf("the removal's entry does not name the token: %+v", e)
	}
}
