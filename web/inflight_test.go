package web_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// claimOne has the retry loop claim the one due event of b's database, as
// it does before it runs the event's processor, and returns the claim.
func claimOne(t *testing.T, b *testBundle) queue.Attempts {
	t.Helper()
	a, err := b.store.ClaimAttempts(context.Background(), 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Claimed) != 1 {
		t.Fatalf("claimed %d events, want 1", len(a.Claimed))
	}
	// Its run starts: the attempt is in flight, and counts from here.
	if _, _, err := b.store.SettleAndStart(context.Background(), nil, a.Claimed); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestEventDetail_SaysWhileAnAttemptIsInFlight(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// take leases the event and returns how the notice should
		// start and how the lease ends.
		take func(t *testing.T, b *testBundle, e queue.Event) (want string, end func())
	}{
		{"UntilTheRetryLoopReleasesIt", func(t *testing.T, b *testBundle, e queue.Event) (string, func()) {
			a := claimOne(t, b)
			return "Being delivered: retry 3 of 5 is running now (the retry loop), started just now; it counts as no answer if it has not ended in ",
				func() {
					_, _, err := b.store.SettleAndStart(context.Background(),
						[]queue.Settled{{Claimed: a.Claimed[0], Kind: queue.SettleReleased}}, nil)
					if err != nil {
						t.Fatal(err)
					}
				}
		}},
		{"UntilADeliverysLeaseExpires", func(t *testing.T, b *testBundle, e queue.Event) (string, func()) {
			if _, err := queuetest.NewSeed(b.store).TryLockEvent(context.Background(), e.EventID); err != nil {
				t.Fatal(err)
			}
			return "Being delivered: an attempt is running now (a delivery), started just now; it counts as no answer if it has not ended in ",
				func() {
					_, err := b.pool.Exec(context.Background(),
						`UPDATE webhook_leases SET expires_at = now() - interval '1 second' WHERE event_id = $1`, e.EventID)
					if err != nil {
						t.Fatal(err)
					}
				}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			c := b.client(t)
			c.signIn(accounts.RoleViewer)
			e := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 2})
			path := "/events/" + e.ID.String()
			if got := c.get(path).doc.Find(`[data-testid="inflight-note"]`).Length(); got != 0 {
				t.Fatalf("before any lease the page has %d in-flight notices, want none", got)
			}

			want, end := tc.take(t, b, e)
			page := c.get(path)
			// The lease's expiry is an age, which the test cannot pin.
			if got := strings.Join(strings.Fields(testid(page.doc, "inflight-note")), " "); !strings.HasPrefix(got, want) {
				t.Errorf("in flight, the notice says %q, want %q…", got, want)
			}
			if role, _ := page.doc.Find(`[data-testid="inflight-note"]`).Attr("role"); role != "status" {
				t.Errorf("the notice has role %q, want status", role)
			}

			end()
			if got := c.get(path).doc.Find(`[data-testid="inflight-note"]`).Length(); got != 0 {
				t.Errorf("after the lease ended the page has %d in-flight notices, want none", got)
			}
		})
	}
}

func TestEventLists_MarkEventsInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_running", Status: queue.StatusRetrying, Attempts: 1})
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_waiting", Status: queue.StatusRetrying, Attempts: 1, DueIn: time.Hour})
	insertDead(t, b, "evt_dead_leased")
	insertDead(t, b, "evt_dead_idle")
	claimOne(t, b)
	if _, err := queuetest.NewSeed(b.store).TryLockEvent(ctx, "evt_dead_leased"); err != nil {
		t.Fatal(err)
	}

	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	for list, want := range map[string]map[string]string{
		"/events?status=pending": {"evt_running": "(the retry loop)", "evt_waiting": ""},
		"/events?status=dead":    {"evt_dead_leased": "(a delivery)", "evt_dead_idle": ""},
	} {
		got := map[string]string{}
		c.get(list).doc.Find(`[data-testid="event-row"]`).Each(func(_ int, row *goquery.Selection) {
			id, _ := row.Attr("data-event-id")
			title, _ := row.Find(`[data-testid="inflight-mark"]`).Attr("title")
			got[id] = title
		})
		for id, by := range want {
			if by == "" && got[id] != "" {
				t.Errorf("%s: %s is marked in flight (%q), want no mark", list, id, got[id])
			}
			if by != "" && !strings.Contains(got[id], by) {
				t.Errorf("%s: %s's in-flight mark says %q, want it to name %s", list, id, got[id], by)
			}
		}
	}
}

func TestRetryNow_OnAnEventInFlightWaitsForItsAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_busy", Status: queue.StatusRetrying, Attempts: 1})
	claimOne(t, b)
	claimed := eventNow(t, b, e)

	c := b.client(t)
	u := c.signIn(accounts.RoleOperator)
	detail := c.get("/events/" + e.ID.String())
	const after = "will run again as soon as the try being delivered ends, if it fails"
	if got := testid(detail.doc, "retry-now-note"); !strings.Contains(got, "after Retry now the event "+after) {
		t.Errorf("in flight, Retry now is explained as %q, want it to say the event %s", got, after)
	}
	form := detail.doc.Find(`form:has(button:contains("Retry now"))`)
	action, ok := form.Attr("action")
	if !ok {
		t.Fatal("the detail page of a pending event has no Retry now button")
	}
	back, _ := form.Find(`input[name="back"]`).Attr("value")
	page := c.follow(c.post(action, url.Values{"back": {back}}))
	if got, want := testid(page.doc, "flash"), "evt_busy "+after; got != want {
		t.Errorf("flash %q, want %q", got, want)
	}

	got := eventNow(t, b, e)
	// The attempt running is counted with its outcome: the row still says 1.
	if !got.NextRetryAt.Equal(claimed.NextRetryAt) || !got.ManualRetry || got.Attempts != 1 {
		t.Errorf("after Retry now in flight: next retry %v, manual %v, attempts %d; want %v (unchanged), true, 1",
			got.NextRetryAt, got.ManualRetry, got.Attempts, claimed.NextRetryAt)
	}
	if a := lastAudit(t, b, audit.RetryNow); a.Email != u.Email || a.Target != "evt_busy" || a.Count != 1 {
		t.Errorf("audit entry %+v, want retry now of evt_busy by %s", a, u.Email)
	}

	// The page now says a retry is waiting for the attempt, not when the
	// lease expires.
	detail = c.get("/events/" + e.ID.String())
	if got := testid(detail.doc, "retry-now-note"); !strings.Contains(got, "A retry was asked for") {
		t.Errorf("after Retry now in flight, the note says %q, want it to say a retry was asked for", got)
	}
	next := detail.doc.Find(`.facts div:has(dt:contains("Next retry")) dd`).Text()
	if !strings.Contains(strings.Join(strings.Fields(next), " "), "as soon as the try being delivered ends, if it fails") {
		t.Errorf("Next retry says %q, want as soon as the try being delivered ends", next)
	}
}

// Find an event says when the event searched for is running now: on its
// first run nothing of it is written yet, so without the lease the page
// would say hookd never saw it.
func TestSearch_SaysWhileAnEventIsInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.client(t)
	c.signIn(accounts.RoleViewer)

	if _, err := queuetest.NewSeed(b.store).TryLockEvent(ctx, "evt_first_run"); err != nil {
		t.Fatal(err)
	}
	answer, text := searchAnswer(t, c, "evt_first_run")
	if want := "evt_first_run is being delivered now (a delivery), started just now, and nothing of it is written"; answer != "inflight" || !strings.Contains(text, want) {
		t.Errorf("on its first run: answer %q, %q; want inflight, saying %q", answer, text, want)
	}
	if _, err := b.pool.Exec(ctx, `UPDATE webhook_leases SET expires_at = now() - interval '1 second' WHERE event_id = 'evt_first_run'`); err != nil {
		t.Fatal(err)
	}
	if answer, _ := searchAnswer(t, c, "evt_first_run"); answer != "never" {
		t.Errorf("once its lease expired unreported: answer %q, want never", answer)
	}

	// A queued event a retry is running for is still on the queue, with
	// the attempt in flight beside it.
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_retrying", Status: queue.StatusRetrying, Attempts: 1})
	claimOne(t, b)
	page := c.get("/search?q=evt_retrying")
	if answer, _ := page.doc.Find(`[data-testid="search-answer"]`).Attr("data-answer"); answer != "queued" {
		t.Errorf("a queued event in flight: answer %q, want queued", answer)
	}
	want := "Being delivered: a try is running now (the retry loop), started just now; it counts as no answer if it has not ended in "
	if got := strings.Join(strings.Fields(testid(page.doc, "inflight-note")), " "); !strings.HasPrefix(got, want) {
		t.Errorf("a queued event in flight: the notice says %q, want %q…", got, want)
	}
}
