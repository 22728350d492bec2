package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// searchAnswer searches for q as c and returns the answer's kind and text.
func searchAnswer(t *testing.T, c *client, q string) (answer, text string) {
	t.Helper()
	r := c.get("/search?q=" + url.QueryEscape(q))
	wantStatus(t, r, http.StatusOK)
	sel := r.doc.Find(`[data-testid="search-answer"]`)
	answer, _ = sel.Attr("data-answer")
	return answer, strings.Join(strings.Fields(sel.Text()), " ")
}

func recordAttempt(t *testing.T, b *testBundle, eventID string, path queue.AttemptPath, number int, succeeded bool) {
	t.Helper()
	queuetest.InsertAttempt(t, b.pool, queue.NewAttempt{Source: queue.SourceStripe, EventID: eventID,
		Duration: 3 * time.Millisecond, Succeeded: succeeded, Path: path, Number: number, Error: map[bool]string{false: "downstream answered 500"}[succeeded]})
}

func TestSearch_SaysWhereAnEventIs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	// Processed on its first delivery: a marker and no attempt.
	if err := queuetest.NewSeed(b.store).MarkProcessed(ctx, "evt_first"); err != nil {
		t.Fatal(err)
	}
	// Processed by the second scheduled retry, after two failures.
	recordAttempt(t, b, "evt_retried", queue.PathInline, 0, false)
	recordAttempt(t, b, "evt_retried", queue.PathRetry, 1, false)
	recordAttempt(t, b, "evt_retried", queue.PathRetry, 2, true)
	if err := queuetest.NewSeed(b.store).MarkProcessed(ctx, "evt_retried"); err != nil {
		t.Fatal(err)
	}
	// Processed by a person's retry.
	recordAttempt(t, b, "evt_manual", queue.PathInline, 0, false)
	recordAttempt(t, b, "evt_manual", queue.PathManual, 1, true)
	if err := queuetest.NewSeed(b.store).MarkProcessed(ctx, "evt_manual"); err != nil {
		t.Fatal(err)
	}
	// Recovered by reconciliation: Stripe's delivery never reached hookd.
	recordAttempt(t, b, "evt_reconciled", queue.PathReconcile, 0, true)
	if err := queuetest.NewSeed(b.store).MarkProcessed(ctx, "evt_reconciled"); err != nil {
		t.Fatal(err)
	}
	dead := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_dead", Status: queue.StatusDead,
		Attempts: 5, LastError: "downstream answered 500: nope"})

	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	for _, tc := range []struct {
		q, answer, says string
	}{
		{"evt_first", "processed", "on its first delivery, while Stripe waited"},
		{"  evt_retried ", "processed", "by retry 2, on the retry loop's schedule"},
		{"evt_manual", "processed", "was processed just now by retry 1, which a person asked for"},
		{"evt_reconciled", "processed", "by reconciliation: hookd found it in Stripe's event list"},
		{"evt_dead", "queued", "On the queue: dead"},
		{dead.ID.String(), "queued", "evt_dead"},
		{"evt_never", "never", "hookd has no record of evt_never"},
	} {
		answer, text := searchAnswer(t, c, tc.q)
		if answer != tc.answer || !strings.Contains(text, tc.says) {
			t.Errorf("search %q: answer %q saying %q; want %q saying %q", tc.q, answer, text, tc.answer, tc.says)
		}
	}

	r := c.get("/search?q=evt_dead")
	href, _ := r.doc.Find(`[data-testid="search-open"]`).Attr("href")
	if href != "/events/"+dead.ID.String() {
		t.Errorf("the queued answer links to %q, want its detail", href)
	}
	if n := c.get("/search?q=evt_retried").doc.Find(`[data-testid="attempt-row"]`).Length(); n != 3 {
		t.Errorf("the processed answer shows %d attempts, want 3", n)
	}
	// A scheduled retry that failed and a person's that succeeded, both
	// numbered 1, are told apart.
	recordAttempt(t, b, "evt_twice", queue.PathInline, 0, false)
	recordAttempt(t, b, "evt_twice", queue.PathRetry, 1, false)
	recordAttempt(t, b, "evt_twice", queue.PathManual, 1, true)
	if err := queuetest.NewSeed(b.store).MarkProcessed(ctx, "evt_twice"); err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, l := range c.get("/search?q=evt_twice").doc.Find(`[data-testid="attempt-label"]`).EachIter() {
		labels = append(labels, strings.TrimSpace(l.Text()))
	}
	if want := []string{"Inline attempt", "Retry 1", "Retry a person asked for"}; strings.Join(labels, "|") != strings.Join(want, "|") {
		t.Errorf("attempts labelled %q, want %q", labels, want)
	}
}

func TestSearch_EmptyAndOverlongQueries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(accounts.RoleViewer)

	r := c.get("/search")
	wantStatus(t, r, http.StatusOK)
	if r.doc.Find(`[data-testid="search-answer"]`).Length() != 0 || r.doc.Find(`#search-q`).Length() != 1 {
		t.Error("the empty search page shows an answer, or no search field")
	}
	r = c.get("/search?q=" + strings.Repeat("x", 256))
	wantStatus(t, r, http.StatusBadRequest)
	if got := r.doc.Find(`[role="alert"]`).Text(); !strings.Contains(got, "at most 255 characters") {
		t.Errorf("overlong query: alert %q", got)
	}
}

func TestSearch_BoxOnEveryPageAndSignInRequired(t *testing.T) {
	t.Parallel()
	b := setup(t)
	anon := b.client(t)
	r := anon.get("/search?q=evt_x")
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/login") {
		t.Errorf("search without a session: %d to %q, want a redirect to /login", r.status, r.header.Get("Location"))
	}
	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	for _, path := range []string{"/", "/events?status=dead", "/events?status=pending", "/failures", "/audit", "/search"} {
		form := c.get(path).doc.Find(`header form[action="/search"]`)
		if form.Length() != 1 || form.Find(`input[name="q"]`).Length() != 1 {
			t.Errorf("%s has no search box in its header", path)
		}
	}
}
