package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// An event whose run a crash cut short is a suspect: the overview counts
// the suspects and the event's page says it runs next alone; once its run
// alone completed, the page says it ran alone after a crash.
func TestEventDetail_SaysASuspectRanAloneAfterACrash(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	c.signIn(accounts.RoleViewer)
	e := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusFailed})
	path := "/events/" + e.ID.String()
	if got := c.get(path).doc.Find(`[data-testid="suspect-note"]`).Length(); got != 0 {
		t.Fatalf("before any crash the page has %d suspect notices, want none", got)
	}
	if got := c.get("/overview/stats").doc.Find(`[data-testid="count-suspects"]`).Length(); got != 0 {
		t.Fatalf("with no suspect the overview counts them: %d", got)
	}

	// The retry loop's run starts, and its process dies: the next claim
	// takes the lease over and makes the event a suspect.
	claimOne(t, b)
	if _, err := b.pool.Exec(context.Background(), `UPDATE webhook_leases SET expires_at = now() - interval '1 second';
		UPDATE webhook_events SET next_retry_at = now()`); err != nil {
		t.Fatal(err)
	}
	if a, err := b.store.ClaimAttempts(context.Background(), 10, time.Minute); err != nil || len(a.Claimed) != 0 {
		t.Fatalf("claim after the crash: %+v, %v; want the suspect left to run alone", a.Claimed, err)
	}
	if got := testid(c.get("/overview/stats").doc, "count-suspects"); got != "1" {
		t.Errorf("the overview counts %q suspects, want 1", got)
	}
	const want = "Suspect: hookd stopped while a retry run of this event was in flight (1 time(s) beside others, charged nothing)."
	if got := strings.Join(strings.Fields(testid(c.get(path).doc, "suspect-note")), " "); !strings.HasPrefix(got, want) {
		t.Errorf("the suspect's notice says %q, want %q…", got, want)
	}

	claimed, _, ok, err := b.store.ClaimSuspect(context.Background(), time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim the suspect: %v, %v", ok, err)
	}
	if _, _, err := b.store.SettleAndStart(context.Background(), nil, []queue.Claimed{claimed}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.store.SettleAndStart(context.Background(), []queue.Settled{{Claimed: claimed, Kind: queue.SettleFailed,
		Attempt: &queue.NewAttempt{Source: queue.SourceStripe, EventID: e.EventID, Path: queue.PathRetry,
			Number: claimed.Event.Attempts, HTTPStatus: 500, Error: "app answered 500"}}}, nil); err != nil {
		t.Fatal(err)
	}
	const cleared = "Ran alone after a crash: hookd stopped while it ran this event with others (a retry run,"
	if got := strings.Join(strings.Fields(testid(c.get(path).doc, "suspect-note")), " "); !strings.HasPrefix(got, cleared) {
		t.Errorf("after its run alone the notice says %q, want %q…", got, cleared)
	}
	if got := c.get("/overview/stats").doc.Find(`[data-testid="count-suspects"]`).Length(); got != 0 {
		t.Errorf("with the suspect cleared the overview still counts suspects")
	}
}
