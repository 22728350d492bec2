package web_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/alexedwards/scs/pgxstore"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/web"
	"github.com/hookd/hookd/worker"
)

// setupEndpoints serves the receiver, over three labelled endpoints and an
// app that fails every event (so each stays on the queue to be looked
// at), and the dashboard.
func setupEndpoints(t *testing.T) *testBundle {
	t.Helper()
	eps, err := endpoint.ParseSecrets("account=whsec_account;connect=whsec_connect;thin=whsec_thin")
	if err != nil {
		t.Fatal(err)
	}
	if err := endpoint.Configure(eps, "connect:connect=true;thin:kind=thin,connect=true"); err != nil {
		t.Fatal(err)
	}
	bundle := setup(t, withoutServer())
	failing := worker.ProcessorFunc(func(context.Context, worker.Delivery) worker.Result {
		return worker.Result{Err: errors.New("downstream answered 500"), HTTPStatus: 500}
	})
	opts := web.Options{Sessions: pgxstore.NewWithCleanupInterval(bundle.pool, 0), Gatherer: prometheus.NewRegistry(),
		Receiver: receiver.New(bundle.store, discardLogger, receiver.Config{Endpoints: eps, Processor: failing})}
	stores := storesOn(bundle.store, bundle.pool)
	opts.Stores = stores
	srv := httptest.NewServer(web.NewServer(opts))
	t.Cleanup(srv.Close)
	bundle.srv = srv
	return bundle
}

func deliver(t *testing.T, b *testBundle, body []byte, secret string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+stripeevent.ReceiverPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Stripe-Signature", stripeevent.Sign(body, secret, time.Now()))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("delivery answered %d", res.StatusCode)
	}
}

// The lists show each event's endpoint, mode and account as badges and
// filter on them; a thin event's page shows its related object, context,
// reason and its pair, and the snapshot event's search answer links back;
// the overview shows when each endpoint was last pinged.
func TestEndpoints_ShownAndFiltered(t *testing.T) {
	t.Parallel()
	b := setupEndpoints(t)
	snapID, thinID, connectID := stripeevent.NewID("evt"), stripeevent.NewID("evt"), stripeevent.NewID("evt")
	deliver(t, b, stripeevent.Minimal(snapID, "invoice.paid"), "whsec_account")
	deliver(t, b, stripeevent.ThinEvent{ID: thinID, Type: "v1.invoice.paid", Created: time.Now(), Context: "acct_1Thin",
		Related:       stripeevent.RelatedObject{ID: "in_77", Type: "invoice", URL: "/v1/invoices/in_77"},
		SnapshotEvent: snapID, RequestID: "req_v2xyz"}.JSON(), "whsec_thin")
	deliver(t, b, stripeevent.Connect(connectID, "charge.succeeded", "acct_1Conn", true), "whsec_connect")
	deliver(t, b, stripeevent.Ping(stripeevent.NewID("evt"), "ed_1"), "whsec_thin")

	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	rowsOf := func(path string) []string {
		t.Helper()
		r := c.get(path)
		wantStatus(t, r, http.StatusOK)
		var ids []string
		for _, n := range r.doc.Find(`[data-testid="event-row"]`).EachIter() {
			id, _ := n.Attr("data-event-id")
			ids = append(ids, id)
		}
		return ids
	}
	for path, want := range map[string]string{
		"/events?status=pending&endpoint=connect":      connectID,
		"/events?status=pending&endpoint=thin":         thinID,
		"/events?status=pending&mode=live":             connectID,
		"/events?status=pending&account=acct_1Thin":    thinID,
		"/events?status=pending&endpoint=account":      snapID,
		"/events?status=pending&endpoint=account&mode": snapID,
	} {
		if got := rowsOf(path); len(got) != 1 || got[0] != want {
			t.Errorf("%s lists %v, want [%s]", path, got, want)
		}
	}
	if got := rowsOf("/events?status=pending"); len(got) != 3 {
		t.Errorf("the pending list has %d rows, want 3", len(got))
	}

	list := c.get("/events?status=pending&endpoint=connect")
	row := list.doc.Find(`[data-testid="event-row"]`)
	for id, want := range map[string]string{"endpoint-badge": "connect", "mode-badge": "live", "account-badge": "acct_1Conn"} {
		if got := strings.TrimSpace(row.Find(`[data-testid="` + id + `"]`).Text()); got != want {
			t.Errorf("%s: %q, want %q", id, got, want)
		}
	}

	href, ok := c.get("/events?status=pending&endpoint=thin").doc.Find(`[data-testid="event-row"] a`).First().Attr("href")
	if !ok {
		t.Fatal("no link to the thin event's page")
	}
	detail := c.get(href)
	wantStatus(t, detail, http.StatusOK)
	for id, want := range map[string]string{"related-object": "in_77", "context": "acct_1Thin", "reason": "req_v2xyz",
		"pair": snapID} {
		if got := testid(detail.doc, id); !strings.Contains(got, want) {
			t.Errorf("thin event's page: %s %q does not show %q", id, got, want)
		}
	}
	if got := testid(c.get("/search?q="+snapID).doc, "pair-note"); !strings.Contains(got, thinID) {
		t.Errorf("the snapshot event's answer %q does not link to its thin event %s", got, thinID)
	}

	overview := c.get("/")
	wantStatus(t, overview, http.StatusOK)
	ping := overview.doc.Find(`[data-testid="endpoint-row"][data-endpoint="thin"] [data-testid="last-ping"]`)
	if text := strings.TrimSpace(ping.Text()); text == "" || strings.Contains(text, "never") {
		t.Errorf("the overview's last ping of thin is %q, want when it was", text)
	}
}

// A Connect event through an endpoint declared without connect=true is
// accepted, and the overview and the endpoint's list say what the
// declaration costs, until the declaration says what arrives.
func TestEndpoints_DeclarationContradictedIsABanner(t *testing.T) {
	t.Parallel()
	bundle := setup(t, withoutServer())
	serve := func(settings string) *testBundle {
		eps, err := endpoint.ParseSecrets("account=whsec_account;learned=whsec_learned")
		if err != nil {
			t.Fatal(err)
		}
		if err := endpoint.Configure(eps, settings); err != nil {
			t.Fatal(err)
		}
		opts := web.Options{Sessions: pgxstore.NewWithCleanupInterval(bundle.pool, 0), Gatherer: prometheus.NewRegistry(),
			Receiver: receiver.New(bundle.store, discardLogger, receiver.Config{Endpoints: eps, Processor: worker.Discard}),
			Stores:   storesOn(bundle.store, bundle.pool), Endpoints: eps}
		srv := httptest.NewServer(web.NewServer(opts))
		t.Cleanup(srv.Close)
		b := *bundle
		b.srv = srv
		return &b
	}
	// The banner shows the message's code as code, without the
	// backticks it is written with for terminals and chat.
	const says = "endpoint account receives Connect events but is not declared connect=true: " +
		"reconciliation lists no connected account for it. Every such event"

	b := serve("account:stripe_id=we_1")
	deliver(t, b, stripeevent.Connect(stripeevent.NewID("evt"), "invoice.paid", "acct_1A", true), "whsec_account")
	deliver(t, b, stripeevent.Connect(stripeevent.NewID("evt"), "invoice.paid", "acct_1B", true), "whsec_learned")
	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	for _, path := range []string{"/", "/events?status=dead&endpoint=account"} {
		r := c.get(path)
		wantStatus(t, r, http.StatusOK)
		if got := testid(r.doc, "declaration-banner"); !strings.Contains(got, says) || strings.Contains(got, "learned") ||
			strings.Contains(got, "`") {
			t.Errorf("%s: banner %q, want it to say %q, with no backtick, and nothing of the endpoint that declares nothing",
				path, got, says)
		}
		code := r.doc.Find(`[data-testid="declaration-banner"] code`)
		if got := code.Map(func(_ int, s *goquery.Selection) string { return s.Text() }); fmt.Sprint(got) != "[account connect=true]" {
			t.Errorf("%s: the banner's code is %q, want account and connect=true", path, got)
		}
	}
	if got := testid(c.get("/events?status=dead&endpoint=learned").doc, "declaration-banner"); got != "" {
		t.Errorf("the list of the endpoint that declares nothing has a banner: %q", got)
	}

	fixed := serve("account:stripe_id=we_1,connect=true")
	c = fixed.client(t)
	c.signIn(accounts.RoleOperator)
	for _, path := range []string{"/", "/events?status=dead&endpoint=account"} {
		if got := testid(c.get(path).doc, "declaration-banner"); got != "" {
			t.Errorf("%s: banner %q once the declaration says connect=true", path, got)
		}
	}
}

// A processed thin event's page (its search answer) shows its related
// object, context and reason from the payload the event log keeps, and an
// event's object and customer link to their history.
func TestEndpoints_ProcessedThinEventShowsWhatItSays(t *testing.T) {
	t.Parallel()
	bundle := setup(t, withoutServer())
	eps, err := endpoint.ParseSecrets("thin=whsec_thin")
	if err != nil {
		t.Fatal(err)
	}
	ok := worker.ProcessorFunc(func(context.Context, worker.Delivery) worker.Result { return worker.Result{} })
	opts := web.Options{Sessions: pgxstore.NewWithCleanupInterval(bundle.pool, 0), Gatherer: prometheus.NewRegistry(),
		Receiver: receiver.New(bundle.store, discardLogger, receiver.Config{Endpoints: eps, Processor: ok}),
		Stores:   storesOn(bundle.store, bundle.pool), Endpoints: eps}
	srv := httptest.NewServer(web.NewServer(opts))
	t.Cleanup(srv.Close)
	bundle.srv = srv

	thinID := stripeevent.NewID("evt")
	snapshot, snapID, err := stripeevent.SampleIn("invoice.paid", "test", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	deliver(t, bundle, stripeevent.ThinEvent{ID: thinID, Type: "v1.invoice.paid", Created: time.Now(), Context: "acct_1Thin",
		Related:   stripeevent.RelatedObject{ID: "in_77", Type: "invoice", URL: "/v1/invoices/in_77"},
		RequestID: "req_v2xyz"}.JSON(), "whsec_thin")
	deliver(t, bundle, snapshot, "whsec_thin")

	c := bundle.client(t)
	c.signIn(accounts.RoleViewer)
	page := c.get("/search?q=" + thinID)
	wantStatus(t, page, http.StatusOK)
	if answer, _ := page.doc.Find(`[data-testid="search-answer"]`).Attr("data-answer"); answer != "processed" {
		t.Fatalf("the thin event is %q, want processed", answer)
	}
	for id, want := range map[string]string{"related-object": "in_77", "context": "acct_1Thin", "reason": "req_v2xyz"} {
		if got := testid(page.doc, id); !strings.Contains(got, want) {
			t.Errorf("the processed thin event's page: %s %q does not show %q", id, got, want)
		}
	}

	snap := c.get("/search?q=" + snapID)
	for id, want := range map[string]string{"object": "/search?q=in_", "customer": "/search?q=cus_"} {
		href, _ := snap.doc.Find(`[data-testid="` + id + `"] a`).Attr("href")
		if !strings.HasPrefix(href, want) {
			t.Errorf("the event's %s links to %q, want its history (%s...)", id, href, want)
		}
	}
}
