package web_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/alexedwards/scs/pgxstore"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/rejections"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/internal/telemetry"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web"
)

// rejectionBundle is the receiver and the dashboard with a rejection log.
type rejectionBundle struct {
	*testBundle
	log *telemetry.RejectionLog
}

func setupRejections(t *testing.T, maxBody int64) *rejectionBundle {
	t.Helper()
	return setupRejectionsWith(t, maxBody, telemetry.RejectionLogConfig{PerFlush: 1000})
}

// setupRejectionsWith is setupRejections with the rejection log configured
// by cfg, which gets the receiver's secret.
func setupRejectionsWith(t *testing.T, maxBody int64, cfg telemetry.RejectionLogConfig) *rejectionBundle {
	t.Helper()
	bundle := setup(t, withoutServer())
	cfg.Secrets = []string{testSecret}
	stores := storesOn(bundle.store, bundle.pool)
	log := telemetry.NewRejectionLog(stores.Rejections, discardLogger, cfg)
	receiver := receiver.New(bundle.store, discardLogger, receiver.Config{Secrets: []string{testSecret}})
	srv := httptest.NewServer(web.NewServer(web.Options{Logger: discardLogger, Stores: stores, Receiver: receiver,
		Gatherer: prometheus.NewRegistry(), MaxBody: maxBody, Sessions: pgxstore.NewWithCleanupInterval(bundle.pool, 0), Rejections: log}))
	t.Cleanup(srv.Close)
	bundle.srv = srv
	return &rejectionBundle{log: log, testBundle: bundle}
}

// flushed writes what the log holds and returns the whole log, newest first.
func (b *rejectionBundle) flushed(t *testing.T) []rejections.Rejection {
	t.Helper()
	if err := b.log.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	page, err := rejections.New(b.pool).List(context.Background(), rejections.Filter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return page.Rejections
}

func TestRejections_EveryRefusalIsLoggedWithItsReason(t *testing.T) {
	t.Parallel()
	b := setupRejections(t, 4096)
	const secretBody = "card_holder_name_that_must_never_be_stored"
	event := func(id string) []byte {
		return []byte(`{"id":"` + id + `","object":"event","type":"invoice.paid","data":{"object":{"note":"` + secretBody + `"}}}`)
	}
	now := time.Now()
	stale := now.Add(-10 * time.Minute)
	for _, tc := range []struct {
		name        string
		method      string
		body        []byte
		sig         string
		wantStatus  int
		wantReason  rejections.Reason
		wantClaimed string
		wantSigned  *time.Time
		wantMatches *bool
	}{
		{name: "TooLarge", body: append(event("evt_big"), bytes.Repeat([]byte(" "), 5000)...),
			sig: stripeevent.Sign(event("evt_big"), testSecret, now), wantStatus: 413, wantReason: rejections.TooLarge, wantClaimed: "evt_big",
			wantSigned: &now},
		{name: "NoSignature", body: event("evt_unsigned"), wantStatus: 400, wantReason: rejections.NoSignature, wantClaimed: "evt_unsigned"},
		{name: "MalformedSignature", body: event("evt_malformed"), sig: "t=notanumber,v1=abc", wantStatus: 400,
			wantReason: rejections.MalformedSignature, wantClaimed: "evt_malformed"},
		{name: "StaleWithTheRightSecret", body: event("evt_drift"), sig: stripeevent.Sign(event("evt_drift"), testSecret, stale),
			wantStatus: 400, wantReason: rejections.StaleSignature, wantClaimed: "evt_drift", wantSigned: &stale, wantMatches: ptr(true)},
		{name: "StaleWithAnotherSecret", body: event("evt_forged_old"), sig: stripeevent.Sign(event("evt_forged_old"), "whsec_other", stale),
			wantStatus: 400, wantReason: rejections.StaleSignature, wantClaimed: "evt_forged_old", wantSigned: &stale, wantMatches: ptr(false)},
		{name: "WrongSecret", body: event("evt_wrong"), sig: stripeevent.Sign(event("evt_wrong"), "whsec_other", now),
			wantStatus: 400, wantReason: rejections.WrongSignature, wantClaimed: "evt_wrong", wantSigned: &now},
		{name: "NotJSON", body: []byte("id=evt_form&type=x"), sig: stripeevent.Sign([]byte("id=evt_form&type=x"), testSecret, now),
			wantStatus: 400, wantReason: rejections.BadJSON, wantSigned: &now},
		{name: "NotUTF8", body: []byte("{\"id\":\"evt_bin\xff\"}"), sig: stripeevent.Sign([]byte("{\"id\":\"evt_bin\xff\"}"), testSecret, now),
			wantStatus: 400, wantReason: rejections.BadJSON, wantSigned: &now},
		{name: "NoID", body: []byte(`{"type":"invoice.paid"}`), sig: stripeevent.Sign([]byte(`{"type":"invoice.paid"}`), testSecret, now),
			wantStatus: 400, wantReason: rejections.BadID, wantSigned: &now},
		{name: "NoType", body: []byte(`{"id":"evt_typeless"}`), sig: stripeevent.Sign([]byte(`{"id":"evt_typeless"}`), testSecret, now),
			wantStatus: 400, wantReason: rejections.BadType, wantClaimed: "evt_typeless", wantSigned: &now},
		{name: "IDNotAString", body: []byte(`{"id":42,"type":"x"}`), sig: stripeevent.Sign([]byte(`{"id":42,"type":"x"}`), testSecret, now),
			wantStatus: 400, wantReason: rejections.BadID, wantSigned: &now},
		{name: "NotAPost", method: http.MethodGet, wantStatus: 405, wantReason: rejections.MethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			req, err := http.NewRequest(method, b.srv.URL+"/webhooks/stripe", bytes.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.sig != "" {
				req.Header.Set("Stripe-Signature", tc.sig)
			}
			got := do(t, req)
			if got.status != tc.wantStatus {
				t.Fatalf("answered %d %q, want %d", got.status, got.body, tc.wantStatus)
			}
			rows := b.flushed(t)
			r := rows[0]
			if r.Reason != tc.wantReason || r.HTTPStatus != tc.wantStatus || r.Count != 1 {
				t.Errorf("logged %s (%d) ×%d, want %s (%d) ×1", r.Reason, r.HTTPStatus, r.Count, tc.wantReason, tc.wantStatus)
			}
			if r.Detail != strings.TrimSpace(got.body) {
				t.Errorf("logged detail %q, want what the sender was told, %q", r.Detail, got.body)
			}
			if r.RemoteAddr != "127.0.0.1" {
				t.Errorf("logged remote address %q, want 127.0.0.1", r.RemoteAddr)
			}
			if claimed := deref(r.ClaimedEventID); claimed != tc.wantClaimed {
				t.Errorf("logged claimed id %q, want %q", claimed, tc.wantClaimed)
			}
			switch {
			case tc.wantSigned == nil && r.SignedAt != nil:
				t.Errorf("logged a signature time %s for a request without one", r.SignedAt)
			case tc.wantSigned != nil && (r.SignedAt == nil || r.SignedAt.Unix() != tc.wantSigned.Unix()):
				t.Errorf("logged signature time %v, want %s", r.SignedAt, tc.wantSigned)
			}
			if tc.wantMatches != nil && (r.SignatureMatches == nil || *r.SignatureMatches != *tc.wantMatches) {
				t.Errorf("logged signature_matches %v, want %v", r.SignatureMatches, *tc.wantMatches)
			}
			if strings.Contains(r.Detail, secretBody) {
				t.Error("the body reached the log")
			}
		})
	}

	var stored int64
	if err := b.pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_rejections
		WHERE row_to_json(webhook_rejections)::text LIKE '%' || $1 || '%'`, secretBody).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 0 {
		t.Errorf("%d rejection rows hold part of a body", stored)
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_events`) + queuetest.Markers(t, b.pool); n != 0 {
		t.Errorf("refused deliveries left %d queue rows or markers", n)
	}

	// Each claimed id says whose claim it is: only a body refused after its
	// signature verified was signed with a configured secret.
	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	notes := map[string]string{}
	c.get("/rejections").doc.Find(`[data-testid="rejection-row"]`).Each(func(_ int, tr *goquery.Selection) {
		if id := tr.Find(`td[data-label="Claimed event"] a`).Text(); id != "" {
			notes[id] = tr.Find(`[data-testid="claim-note"]`).Text()
		}
	})
	for _, id := range []string{"evt_big", "evt_unsigned", "evt_malformed", "evt_drift", "evt_forged_old", "evt_wrong", "evt_typeless"} {
		want := "claimed by an unverified body"
		if id == "evt_typeless" {
			want = "claimed by a body signed with a configured secret"
		}
		if notes[id] != want {
			t.Errorf("/rejections marks %s %q, want %q", id, notes[id], want)
		}
	}
}

func TestRejections_AcceptedDeliveriesAreNotLogged(t *testing.T) {
	t.Parallel()
	b := setupRejections(t, 1<<20)
	body := stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")
	if got := post(t, b.srv, body, stripeevent.Sign(body, testSecret, time.Now())); got.status != 200 {
		t.Fatalf("got %d %q, want 200", got.status, got.body)
	}
	if rows := b.flushed(t); len(rows) != 0 {
		t.Errorf("an accepted delivery was logged as refused: %+v", rows)
	}
}

func TestRejections_PageOverviewAndSearch(t *testing.T) {
	t.Parallel()
	b := setupRejections(t, 1<<20)
	wrong := func(id string) {
		body := stripeevent.Minimal(id, "invoice.paid")
		if got := post(t, b.srv, body, stripeevent.Sign(body, "whsec_other", time.Now())); got.status != 400 {
			t.Fatalf("got %d, want 400", got.status)
		}
	}
	wrong("evt_refused_1")
	wrong("evt_refused_1")
	wrong("evt_refused_2")
	if got := post(t, b.srv, []byte(`{}`), ""); got.status != 400 {
		t.Fatalf("got %d, want 400", got.status)
	}
	b.flushed(t)

	c := b.client(t)
	c.signIn(accounts.RoleViewer)

	r := c.get("/rejections")
	wantStatus(t, r, http.StatusOK)
	rows := r.doc.Find(`[data-testid="rejection-row"]`)
	if rows.Length() != 4 {
		t.Fatalf("%d rows on /rejections, want 4", rows.Length())
	}
	first := rows.Last() // oldest
	if text := strings.Join(strings.Fields(first.Text()), " "); !strings.Contains(text, "Wrong signature") ||
		!strings.Contains(text, "evt_refused_1 claimed by an unverified body") || !strings.Contains(text, "127.0.0.1") ||
		!strings.Contains(text, "is STRIPE_WEBHOOK_SECRET this endpoint's signing secret?") {
		t.Errorf("a wrong-secret row reads %q", text)
	}
	if n := c.get("/rejections?reason=wrong_signature").doc.Find(`[data-testid="rejection-row"]`).Length(); n != 3 {
		t.Errorf("filtered by reason: %d rows, want 3", n)
	}
	if n := c.get("/rejections?q=evt_refused_1").doc.Find(`[data-testid="rejection-row"]`).Length(); n != 2 {
		t.Errorf("filtered by claimed id: %d rows, want 2", n)
	}
	wantStatus(t, c.get("/rejections?reason=nonsense"), http.StatusBadRequest)

	overview := c.get("/")
	if got := testid(overview.doc, "count-refused"); got != "4" {
		t.Errorf("overview: %q refused in 24 h, want 4", got)
	}
	var reasons []string
	overview.doc.Find(`[data-testid="refused-by-reason"] li`).Each(func(_ int, li *goquery.Selection) {
		reasons = append(reasons, strings.Join(strings.Fields(li.Text()), " "))
	})
	if got := strings.Join(reasons, "; "); got != "3 Wrong signature; 1 No signature" {
		t.Errorf("overview: refused by reason %q", got)
	}

	answer, text := searchAnswer(t, c, "evt_refused_1")
	if answer != "rejected" || !strings.Contains(text, "2 deliveries whose body claimed this id were refused") {
		t.Errorf("search for a refused event: %q saying %q", answer, text)
	}
	if n := c.get("/search?q=evt_refused_1").doc.Find(`[data-testid="search-refusal"]`).Length(); n != 2 {
		t.Errorf("the search lists %d refusals, want 2", n)
	}
}

// An attacker floods the endpoint with unsigned and garbage posts, far
// above the detailed rows a second, each claiming the id of an event Stripe
// really delivered; meanwhile Stripe's deliveries, signed with a secret
// hookd lacks, are refused too. Every one of those gets a row of its own,
// with its claimed id and signature time, however many of the flood came
// before it, and every claimed id the dashboard shows is marked as the
// claim of an unverified body.
func TestRejections_AFloodOfGarbageCannotFoldAwaySignedRefusals(t *testing.T) {
	t.Parallel()
	b := setupRejectionsWith(t, 1<<20, telemetry.RejectionLogConfig{})
	real := stripeevent.NewID("evt")
	realBody := stripeevent.Minimal(real, "invoice.paid")
	if got := post(t, b.srv, realBody, stripeevent.Sign(realBody, testSecret, time.Now())); got.status != http.StatusOK {
		t.Fatalf("Stripe's delivery: got %d %q, want 200", got.status, got.body)
	}

	const (
		seconds          = 5   // writes of the log, a second apart in production
		garbagePerSecond = 200 // 20 times the default budget of 10
		signedPerSecond  = 3
		senders          = 8
	)
	claim := []byte(`{"id":"` + real + `","object":"event","type":"invoice.paid"}`)
	staleSig := stripeevent.Sign(claim, "whsec_attackers_own", time.Now().Add(-time.Hour))
	garbage := []string{"", "t=abc,v1=zz", "garbage", "v1=" + strings.Repeat("a", 64), staleSig}
	flood := func(n int) {
		var wg sync.WaitGroup
		for s := range senders {
			wg.Go(func() {
				for i := s; i < n; i += senders {
					if got := post(t, b.srv, claim, garbage[i%len(garbage)]); got.status != http.StatusBadRequest {
						t.Errorf("garbage post: got %d %q, want 400", got.status, got.body)
					}
				}
			})
		}
		wg.Wait()
	}
	var signedIDs []string
	for range seconds {
		// The flood is well past the budget when Stripe's deliveries come,
		// and goes on alongside them.
		flood(garbagePerSecond / 2)
		var wg sync.WaitGroup
		wg.Go(func() { flood(garbagePerSecond / 2) })
		for range signedPerSecond {
			id := stripeevent.NewID("evt")
			signedIDs = append(signedIDs, id)
			body := stripeevent.Minimal(id, "invoice.paid")
			if got := post(t, b.srv, body, stripeevent.Sign(body, "whsec_rotated_away", time.Now())); got.status != http.StatusBadRequest {
				t.Errorf("wrong secret: got %d %q, want 400", got.status, got.body)
			}
		}
		wg.Wait()
		if err := b.log.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}

	var signedRows, signedCounted, garbageRows, garbageCounted int64
	err := b.pool.QueryRow(context.Background(), `
		SELECT count(*) FILTER (WHERE reason = 'wrong_signature' AND count = 1 AND claimed_event_id = ANY ($1)),
		       coalesce(sum(count) FILTER (WHERE reason = 'wrong_signature'), 0),
		       count(*) FILTER (WHERE reason <> 'wrong_signature' AND count = 1),
		       coalesce(sum(count) FILTER (WHERE reason <> 'wrong_signature'), 0)
		FROM webhook_rejections`, signedIDs).Scan(&signedRows, &signedCounted, &garbageRows, &garbageCounted)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("during the flood: %d of %d wrong-secret refusals got a row of their own", signedRows, len(signedIDs))
	if signedRows != seconds*signedPerSecond || signedCounted != seconds*signedPerSecond {
		t.Errorf("wrong-secret refusals: %d rows of their own, %d counted; want each of the %d in a row of its own",
			signedRows, signedCounted, seconds*signedPerSecond)
	}
	// The flood comes from one address (the test's), which gets its share
	// of the budget, 3 rows a second (PerAddress), and no more.
	if garbageRows != seconds*3 || garbageCounted != seconds*garbagePerSecond {
		t.Errorf("garbage: %d rows of their own, %d counted; want 3 a second (%d) and all %d counted",
			garbageRows, garbageCounted, seconds*3, seconds*garbagePerSecond)
	}

	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	const unverified = "claimed by an unverified body"
	answer, _ := searchAnswer(t, c, real)
	if answer != "processed" {
		t.Errorf("search for the event Stripe delivered: %q, want processed", answer)
	}
	refusals := c.get("/search?q=" + real).doc.Find(`[data-testid="search-refusal"]`)
	if refusals.Length() == 0 {
		t.Fatal("the search lists none of the refusals that claimed the real id")
	}
	refusals.Each(func(i int, li *goquery.Selection) {
		if text := strings.Join(strings.Fields(li.Text()), " "); !strings.Contains(text, unverified) {
			t.Errorf("search refusal %d reads %q, without %q", i, text, unverified)
		}
	})
	rows := c.get("/rejections").doc.Find(`[data-testid="rejection-row"]`)
	claimed := 0
	rows.Each(func(i int, tr *goquery.Selection) {
		cell := tr.Find(`td[data-label="Claimed event"]`)
		if cell.Find("a").Length() == 0 {
			return
		}
		claimed++
		if text := strings.Join(strings.Fields(cell.Text()), " "); !strings.Contains(text, unverified) {
			t.Errorf("rejection row %d's claimed event reads %q, without %q", i, text, unverified)
		}
	})
	if claimed == 0 {
		t.Error("no row on /rejections shows a claimed id")
	}
}

func TestRejections_EmptyStateAndSignInRequired(t *testing.T) {
	t.Parallel()
	b := setupRejections(t, 1<<20)
	anon := b.client(t)
	if r := anon.get("/rejections"); r.status != http.StatusSeeOther {
		t.Errorf("/rejections without a session: %d, want a redirect to sign in", r.status)
	}
	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	r := c.get("/rejections")
	wantStatus(t, r, http.StatusOK)
	if text := strings.Join(strings.Fields(r.doc.Find(".empty").Text()), " "); !strings.Contains(text, "No refused deliveries") ||
		!strings.Contains(text, "Deliveries hookd refuses land here") {
		t.Errorf("empty rejection log says %q", text)
	}
	if got := testid(c.get("/").doc, "count-refused"); got != "0" {
		t.Errorf("overview: %q refused, want 0", got)
	}
}

func ptr[T any](v T) *T { return &v }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
