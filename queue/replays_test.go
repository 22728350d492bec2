package queue_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
)

// settleMembers claims up to n members of replay id and settles each as
// outcome says, as the replay runner does: a failed delivery with the
// app's status and error.
func settleMembers(t *testing.T, store *queue.Store, id int64, n int, outcome func(eventID string) (queue.ReplaySettleKind, int, string)) []string {
	t.Helper()
	c, err := store.ClaimReplayed(t.Context(), id, n, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	settled := make([]queue.ReplaySettled, len(c.Members))
	ids := make([]string, len(c.Members))
	for i, m := range c.Members {
		kind, status, text := outcome(m.EventID)
		settled[i] = queue.ReplaySettled{EventID: m.EventID, Kind: kind, Payload: m.Payload,
			Attempt: &queue.NewAttempt{Source: queue.SourceStripe, EventID: m.EventID, Duration: time.Millisecond,
				Succeeded: kind == queue.ReplaySettleDelivered, HTTPStatus: status, Error: text,
				Path: queue.PathReplay, Number: m.Attempts}}
		ids[i] = m.EventID
	}
	written, err := store.SettleReplayed(t.Context(), id, c.Owner, settled)
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range written {
		if !ok {
			t.Fatalf("the outcome of %s was not written", ids[i])
		}
	}
	return ids
}

// TestFailedMembers_NewestFirstWithTheAppsAnswer: a replay's failed
// members are listed newest first with the event's type and what the app
// answered, at most MaxFailedMembersListed of them, and none of its
// delivered ones; the attempt history names the replay of each of its
// attempts.
func TestFailedMembers_NewestFirstWithTheAppsAnswer(t *testing.T) {
	t.Parallel()
	store, b := setup(t)
	ctx := t.Context()
	var events []queuetest.LoggedOpts
	for i := range queue.MaxFailedMembersListed + 10 {
		events = append(events, queuetest.LoggedOpts{EventID: fmt.Sprintf("evt_old_%03d", i)})
	}
	events = append(events, queuetest.LoggedOpts{EventID: "evt_taken"},
		queuetest.LoggedOpts{EventID: "evt_refused", EventType: "customer.updated"})
	queuetest.InsertLogged(t, b.pool, events)
	r, err := store.StartReplay(ctx, "app bug #123 fix", queue.ReplayFilter{From: time.Now().Add(-time.Hour),
		To: time.Now().Add(time.Hour), Processed: true}, "ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := store.FailedMembers(ctx, r.ID); err != nil || len(got) != 0 {
		t.Fatalf("a replay that has delivered nothing lists failures %+v, %v", got, err)
	}

	// The evt_old_ members fail first, in one settle; evt_refused fails
	// last, in a settle of its own, so it is the newest.
	old := settleMembers(t, store, r.ID, len(events)-2, func(string) (queue.ReplaySettleKind, int, string) {
		return queue.ReplaySettleFailed, 500, "downstream answered 500: old bug"
	})
	if len(old) != len(events)-2 {
		t.Fatalf("claimed %d members, want %d", len(old), len(events)-2)
	}
	settleMembers(t, store, r.ID, 2, func(id string) (queue.ReplaySettleKind, int, string) {
		if id == "evt_taken" {
			return queue.ReplaySettleDelivered, 200, ""
		}
		return queue.ReplaySettleFailed, 422, `downstream answered 422: {"error":"Unknown customer"}`
	})

	got, err := store.FailedMembers(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != queue.MaxFailedMembersListed {
		t.Fatalf("%d failed members listed, want %d", len(got), queue.MaxFailedMembersListed)
	}
	first := got[0]
	if first.EventID != "evt_refused" || first.EventType == nil || *first.EventType != "customer.updated" ||
		first.HTTPStatus == nil || *first.HTTPStatus != 422 ||
		first.Error == nil || *first.Error != `downstream answered 422: {"error":"Unknown customer"}` {
		t.Errorf("newest failure %+v, want evt_refused (customer.updated) with its 422", first)
	}
	for i, m := range got {
		if m.EventID == "evt_taken" {
			t.Error("a delivered member is listed as failed")
		}
		if i > 0 && m.FailedAt.After(got[i-1].FailedAt) {
			t.Errorf("failure %d (%s) is newer than the one before it", i, m.EventID)
		}
	}
	r, err = store.Replay(ctx, r.ID)
	if err != nil || r.Failed != int64(queue.MaxFailedMembersListed+11) {
		t.Errorf("the replay counts %d failed (%v), want %d", r.Failed, err, queue.MaxFailedMembersListed+11)
	}

	attempts, err := store.Attempts(ctx, queue.SourceStripe, "evt_refused")
	if err != nil || len(attempts) != 1 {
		t.Fatalf("attempts of evt_refused: %+v, %v", attempts, err)
	}
	if a := attempts[0]; a.Path != queue.PathReplay || a.ReplayID == nil || *a.ReplayID != r.ID ||
		a.ReplayName == nil || *a.ReplayName != "app bug #123 fix" {
		t.Errorf("the replay's attempt %+v does not name its replay", a)
	}
}
