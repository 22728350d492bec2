package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/internal/store/idempotency"
	"github.com/hookd/hookd/internal/store/rejections"
	"github.com/hookd/hookd/internal/store/tokens"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/internal/stripeapi/stripetest"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web"
	"github.com/hookd/hookd/web/api"
	"github.com/hookd/hookd/worker"
	"github.com/hookd/hookd/worker/reconcile"
)

// actionsBundle is hookd's server with /api/v1 on a database of the
// test's own, with everything the actions may need: a reconciler and a
// Stripe client over a fake Stripe API (stripe), whose recovered events
// an app that answers 200 takes.
type actionsBundle struct {
	*testBundle
	stripe *stripetest.Server
}

func setupActions(t *testing.T) *actionsBundle {
	t.Helper()
	b := &actionsBundle{testBundle: setup(t, withoutServer()), stripe: stripetest.NewServer(t)}
	logger := slog.New(slog.DiscardHandler)
	ep := b.stripe.AddEndpoint(stripetest.Endpoint{EnabledEvents: []string{"invoice.paid"}})
	eps := []endpoint.Endpoint{{Label: endpoint.DefaultLabel, Kind: endpoint.Snapshot, StripeID: ep.ID, Secrets: []string{"whsec_api"}}}
	client := stripeapi.New(stripeapi.Config{Key: b.stripe.Key(), URL: b.stripe.URL, PagePause: -1, RateLimitWait: time.Millisecond})
	rec := receiver.New(b.store, logger, receiver.Config{Endpoints: eps, Processor: okApp{}})
	b.srv = httptest.NewServer(web.NewServer(web.Options{Logger: logger, Stores: storesOn(b.store, b.pool), Receiver: rec,
		Gatherer: prometheus.NewRegistry(), Sessions: pgxstore.NewWithCleanupInterval(b.pool, 0), Stripe: client,
		Reconciler: reconcile.New(b.store, rec, logger, reconcile.Config{Client: client, Endpoints: eps}),
		API:        &api.Options{Tokens: tokens.New(b.pool), Idempotency: idempotency.New(b.pool), Rate: lots}}))
	t.Cleanup(b.srv.Close)
	return b
}

// okApp is an app that takes every event.
type okApp struct{}

func (okApp) Process(context.Context, worker.Delivery) worker.Result {
	return worker.Result{HTTPStatus: 200}
}

// token makes an account of role and a token of scope for it, named name,
// and returns a client of the API calling with it, and the token.
func (b *actionsBundle) token(t *testing.T, role accounts.Role, scope tokens.Scope, name string) (*apiClient, tokens.Token) {
	t.Helper()
	secret, tok := b.apiToken(t, role, scope, name)
	return b.api(t, secret), tok
}

// startReplay starts a replay of the processed events of the last hour
// (one, made here), running.
func startReplay(t *testing.T, b *actionsBundle, name string) queue.Replay {
	t.Helper()
	queuetest.InsertLogged(t, b.pool, []queuetest.LoggedOpts{{}})
	r, err := b.store.StartReplay(context.Background(), name, queue.ReplayFilter{From: time.Now().Add(-time.Hour),
		To: time.Now().Add(time.Hour), Processed: true}, "ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// memberAccount makes an account for an admin's token to change.
func memberAccount(t *testing.T, b *actionsBundle) string {
	t.Helper()
	u, err := b.accounts.CreateUser(context.Background(), "member@example.com", "correct horse battery", accounts.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	return strconv.FormatInt(u.ID, 10)
}

// apiWrite is one write of the API, made on a bundle of its own: prepare
// readies what it acts on and returns its path and body; a dry run writes
// no audit entry (action "").
type apiWrite struct {
	name    string
	prepare func(t *testing.T, b *actionsBundle) (path string, body any)
	status  int
	action  audit.Action
	count   int64
}

var apiWrites = []apiWrite{
	{"RetryEvent", func(t *testing.T, b *actionsBundle) (string, any) {
		return "/events/" + queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusDead}).EventID + "/retry", nil
	}, http.StatusOK, audit.Retry, 1},
	{"RetryEventNow", func(t *testing.T, b *actionsBundle) (string, any) {
		e := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusFailed, DueIn: time.Hour})
		return "/events/" + e.EventID + "/retry-now", nil
	}, http.StatusOK, audit.RetryNow, 1},
	{"PauseDelivery", func(*testing.T, *actionsBundle) (string, any) {
		return "/delivery/pause", map[string]any{"reason": "deploy 42"}
	}, http.StatusOK, audit.DeliveryPause, 0},
	{"ResumeDelivery", func(t *testing.T, b *actionsBundle) (string, any) {
		if err := b.store.PauseDelivery(context.Background(), "ops@example.com", "deploy 41"); err != nil {
			t.Fatal(err)
		}
		return "/delivery/resume", nil
	}, http.StatusOK, audit.DeliveryResume, 0},
	{"RetryDeadEvents", func(t *testing.T, b *actionsBundle) (string, any) {
		for range 2 {
			queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusDead, EventType: "invoice.paid"})
		}
		queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusDead, EventType: "charge.refunded"})
		return "/events/retry", map[string]any{"type": "invoice.paid"}
	}, http.StatusOK, audit.RetryAll, 2},
	{"RetryDeadEventsDryRun", func(t *testing.T, b *actionsBundle) (string, any) {
		queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusDead})
		return "/events/retry", map[string]any{"dry_run": true}
	}, http.StatusOK, "", 0},
	{"CancelReplay", func(t *testing.T, b *actionsBundle) (string, any) {
		return fmt.Sprintf("/replays/%d/cancel", startReplay(t, b, "backfill").ID), nil
	}, http.StatusOK, audit.ReplayCancel, 1},
	{"Prune", func(*testing.T, *actionsBundle) (string, any) {
		return "/prune", map[string]any{"days": 30}
	}, http.StatusOK, audit.Prune, 0},
	{"PruneDryRun", func(*testing.T, *actionsBundle) (string, any) {
		return "/prune", map[string]any{"days": 30, "dry_run": true}
	}, http.StatusOK, "", 0},
	{"Erase", func(t *testing.T, b *actionsBundle) (string, any) {
		queuetest.InsertLogged(t, b.pool, []queuetest.LoggedOpts{{Customer: "cus_gone"}, {Customer: "cus_kept"}})
		return "/erase", map[string]any{"customer": "cus_gone"}
	}, http.StatusOK, audit.Erase, 1},
	{"Reconcile", func(t *testing.T, b *actionsBundle) (string, any) {
		b.stripe.AddEvent(stripetest.Event{Type: "invoice.paid", Created: time.Now().Add(-time.Hour)})
		return "/reconcile", map[string]any{"hours": 24}
	}, http.StatusOK, audit.Reconcile, 1},
	{"ReconcileDryRun", func(t *testing.T, b *actionsBundle) (string, any) {
		b.stripe.AddEvent(stripetest.Event{Type: "invoice.paid", Created: time.Now().Add(-time.Hour)})
		return "/reconcile", map[string]any{"hours": 24, "dry_run": true}
	}, http.StatusOK, "", 0},
	{"PullEvent", func(t *testing.T, b *actionsBundle) (string, any) {
		id, _ := b.stripe.AddEvent(stripetest.Event{Type: "invoice.paid", Created: time.Now().Add(-time.Minute)})
		return "/events/pull", map[string]any{"event_id": id}
	}, http.StatusOK, audit.Pull, 1},
	{"AddAccount", func(*testing.T, *actionsBundle) (string, any) {
		return "/accounts", map[string]any{"email": "new@example.com", "password": "correct horse battery", "role": "operator"}
	}, http.StatusCreated, audit.AccountAdd, 1},
	{"SetAccountRole", func(t *testing.T, b *actionsBundle) (string, any) {
		return "/accounts/" + memberAccount(t, b) + "/role", map[string]any{"role": "operator"}
	}, http.StatusOK, audit.AccountRole, 1},
	{"RemoveAccount", func(t *testing.T, b *actionsBundle) (string, any) {
		return "/accounts/" + memberAccount(t, b) + "/remove", nil
	}, http.StatusOK, audit.AccountRemove, 1},
	{"RemoveAccountDryRun", func(t *testing.T, b *actionsBundle) (string, any) {
		return "/accounts/" + memberAccount(t, b) + "/remove", map[string]any{"dry_run": true}
	}, http.StatusOK, "", 0},
	{"EndAccountSessions", func(t *testing.T, b *actionsBundle) (string, any) {
		return "/accounts/" + memberAccount(t, b) + "/sessions/end", nil
	}, http.StatusOK, audit.SessionsEnd, 1},
	{"PauseDestination", func(t *testing.T, b *actionsBundle) (string, any) {
		queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "billing"})
		return "/destinations/billing/pause", map[string]any{"reason": "deploy 42"}
	}, http.StatusOK, audit.DestinationPause, 0},
	{"ResumeDestination", func(t *testing.T, b *actionsBundle) (string, any) {
		queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "billing"})
		if err := b.store.PauseDestination(context.Background(), "billing", "ops@example.com", "deploy 41"); err != nil {
			t.Fatal(err)
		}
		return "/destinations/billing/resume", nil
	}, http.StatusOK, audit.DestinationResume, 0},
	{"MoveDeliveries", func(t *testing.T, b *actionsBundle) (string, any) {
		queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "billing"})
		queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "old", Retired: true})
		queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Destination: "old", Status: queue.StatusDead})
		return "/destinations/old/move", map[string]any{"to": "billing"}
	}, http.StatusOK, audit.DestinationMove, 1},
	{"DropDeliveries", func(t *testing.T, b *actionsBundle) (string, any) {
		queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "old", Retired: true})
		queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Destination: "old", Status: queue.StatusDead})
		return "/destinations/old/drop", nil
	}, http.StatusOK, audit.DestinationDrop, 1},
	{"ReleaseHeldKey", func(t *testing.T, b *actionsBundle) (string, any) {
		heldKey(t, b)
		return "/destinations/billing/release", map[string]any{"key": "cus_a", "reason": "skipped by the app"}
	}, http.StatusOK, audit.OrderRelease, 1},
	{"ReleaseHeldKeyDryRun", func(t *testing.T, b *actionsBundle) (string, any) {
		heldKey(t, b)
		return "/destinations/billing/release", map[string]any{"key": "cus_a", "dry_run": true}
	}, http.StatusOK, "", 0},
}

// heldKey makes key cus_a of the ordered destination billing held by a
// dead event, with one delivery waiting behind it.
func heldKey(t *testing.T, b *actionsBundle) {
	t.Helper()
	queuetest.InsertDestination(t, b.pool, queuetest.DestinationOpts{Name: "billing"})
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Destination: "billing", OrderKey: "cus_a", Status: queue.StatusDead})
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Destination: "billing", OrderKey: "cus_a"})
}

// Each write through the API writes exactly one audit entry, in its
// transaction, naming the token that made it (its id and name) and its
// account; a dry run writes none.
func TestAPI_EveryWriteIsAuditedOnceNamingTheToken(t *testing.T) {
	t.Parallel()
	for _, w := range apiWrites {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			b := setupActions(t)
			c, tok := b.token(t, accounts.RoleAdmin, tokens.ScopeAdmin, "deploy-bot")
			path, body := w.prepare(t, b)
			before := auditEntries(t, b.testBundle)
			c.call(http.MethodPost, path, body).want(t, w.status)
			after := auditEntries(t, b.testBundle)
			added := after[:len(after)-len(before)]
			if w.action == "" {
				if len(added) != 0 {
					t.Fatalf("a dry run wrote %d audit entries: %+v", len(added), added)
				}
				return
			}
			if len(added) != 1 {
				t.Fatalf("%d audit entries, want exactly 1: %+v", len(added), added)
			}
			e := added[0]
			if e.Action != w.action || e.TokenID != tok.ID || e.TokenName != "deploy-bot" || e.AccountID != tok.AccountID ||
				e.Email != "deploy-bot@example.com" || e.Count != w.count {
				t.Errorf("audit entry %+v, want %s of count %d by token %d deploy-bot of deploy-bot@example.com",
					e, w.action, w.count, tok.ID)
			}
		})
	}
}

// A read token is refused every write, an operate token the admins'
// operations; neither changes anything, and each refusal says why.
func TestAPI_ScopesOfTheDashboardsRoles(t *testing.T) {
	t.Parallel()
	b := setupActions(t)
	reader, _ := b.token(t, accounts.RoleViewer, tokens.ScopeRead, "reader")
	operator, _ := b.token(t, accounts.RoleOperator, tokens.ScopeOperate, "operator")
	id := memberAccount(t, b)
	r := startReplay(t, b, "kept")
	admin := []struct{ method, path string }{
		{http.MethodPost, "/prune"}, {http.MethodPost, "/erase"}, {http.MethodGet, "/accounts"}, {http.MethodPost, "/accounts"},
		{http.MethodPost, "/accounts/" + id + "/role"}, {http.MethodPost, "/accounts/" + id + "/remove"},
		{http.MethodPost, "/accounts/" + id + "/sessions/end"},
	}
	operate := []struct{ method, path string }{
		{http.MethodPost, "/events/retry"}, {http.MethodPost, "/events/pull"}, {http.MethodPost, "/reconcile"},
		{http.MethodPost, fmt.Sprintf("/replays/%d/cancel", r.ID)},
	}
	bodies := map[string]any{"/prune": map[string]any{"days": 30}, "/erase": map[string]any{"customer": "cus_x"},
		"/accounts":                 map[string]any{"email": "x@example.com", "password": "correct horse battery", "role": "viewer"},
		"/accounts/" + id + "/role": map[string]any{"role": "admin"}, "/events/retry": map[string]any{},
		"/events/pull": map[string]any{"event_id": "evt_1"}, "/reconcile": map[string]any{"hours": 1}}
	refused := func(c *apiClient, method, path string) {
		t.Helper()
		body := bodies[path]
		if method == http.MethodGet {
			body = nil
		}
		p := c.call(method, path, body).want(t, http.StatusForbidden).problem(t)
		t.Logf("%s %s: %s", method, path, p.Detail)
	}
	before := len(auditEntries(t, b.testBundle))
	for _, op := range append(admin, operate...) {
		refused(reader, op.method, op.path)
	}
	for _, op := range admin {
		refused(operator, op.method, op.path)
	}
	if after := len(auditEntries(t, b.testBundle)); after != before {
		t.Errorf("the refused writes wrote %d audit entries", after-before)
	}
	if got, err := b.store.Replay(context.Background(), r.ID); err != nil || got.State != queue.ReplayRunning {
		t.Errorf("replay after the refusals: %+v, %v; want it running", got, err)
	}
	// What the read token may do: every read of the dashboard's roles for viewers.
	for _, path := range []string{"/replays", "/reconcile", "/rejections"} {
		reader.call(http.MethodGet, path, nil).want(t, http.StatusOK)
	}
}

// A retry of the dead events a filter selects answers what it did, and
// its dry run what it would do, changing nothing.
func TestAPI_RetryDeadEventsAndItsDryRun(t *testing.T) {
	t.Parallel()
	b := setupActions(t)
	c, _ := b.token(t, accounts.RoleOperator, tokens.ScopeOperate, "ops")
	var ids []string
	for range 3 {
		ids = append(ids, queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusDead, EventType: "invoice.paid"}).EventID)
	}
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusDead, EventType: "charge.refunded"})
	var dry api.DeadRetry
	c.call(http.MethodPost, "/events/retry", map[string]any{"type": "invoice.paid", "dry_run": true}).want(t, http.StatusOK).decode(t, &dry)
	if !dry.DryRun || dry.Selected != 3 || dry.Queued != 0 || dry.Filter != "dead events with type invoice.paid" {
		t.Errorf("dry run %+v, want 3 selected, none queued", dry)
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_events WHERE status = 'dead'`); n != 4 {
		t.Fatalf("%d dead after the dry run, want 4", n)
	}
	var done api.DeadRetry
	c.call(http.MethodPost, "/events/retry", map[string]any{"type": "invoice.paid"}).want(t, http.StatusOK).decode(t, &done)
	if done.DryRun || done.Selected != 3 || done.Queued != 3 || done.Erased != 0 {
		t.Errorf("retry %+v, want 3 queued", done)
	}
	for _, id := range ids {
		if e, err := b.store.EventByEventID(context.Background(), id); err != nil || e.Status == queue.StatusDead {
			t.Errorf("%s after the retry: %s, %v", id, e.Status, err)
		}
	}
	p := c.callInvalid(http.MethodPost, "/events/retry", map[string]any{"mode": "staging"}).want(t, http.StatusBadRequest).problem(t)
	if len(problemsOf(p)) == 0 || problemsOf(p)[0].Field != "mode" {
		t.Errorf("a mode neither live nor test: %+v, want the field mode at fault", p)
	}
}

// The replays, the rejection log and the reconcile runs page by cursor:
// the pages together are the list, once each.
func TestAPI_ListsPageByCursor(t *testing.T) {
	t.Parallel()
	b := setupActions(t)
	c, _ := b.token(t, accounts.RoleViewer, tokens.ScopeRead, "reader")
	for i := range 3 {
		startReplay(t, b, fmt.Sprintf("replay %d", i))
	}
	var replays []int64
	for cursor := ""; ; {
		var page api.ReplayList
		c.call(http.MethodGet, "/replays?limit=2"+cursorParam(cursor), nil).want(t, http.StatusOK).decode(t, &page)
		for _, r := range page.Replays {
			replays = append(replays, r.Id)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	if len(replays) != 3 || replays[0] <= replays[1] || replays[1] <= replays[2] {
		t.Errorf("replays by pages of 2: %v, want the 3, newest first", replays)
	}

	claimed := "evt_claimed"
	var rs []rejections.Rejection
	for i := range 5 {
		rs = append(rs, rejections.Rejection{At: time.Now().Add(-time.Duration(i) * time.Minute), Reason: rejections.WrongSignature,
			HTTPStatus: 400, Detail: "no secret matches", RemoteAddr: "192.0.2.1", ClaimedEventID: &claimed})
	}
	rs = append(rs, rejections.Rejection{At: time.Now(), Reason: rejections.BadJSON, HTTPStatus: 400, Detail: "not JSON", RemoteAddr: "192.0.2.2"})
	if err := rejections.New(b.pool).Record(context.Background(), rs); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for cursor := ""; ; {
		var page api.RejectionList
		c.call(http.MethodGet, "/rejections?reason=wrong_signature&limit=2"+cursorParam(cursor), nil).want(t, http.StatusOK).decode(t, &page)
		if page.Total != 5 {
			t.Errorf("total %d, want 5", page.Total)
		}
		for _, r := range page.Rejections {
			if seen[r.Id] || r.Reason != "wrong_signature" || r.ClaimedEventId == nil || *r.ClaimedEventId != claimed {
				t.Errorf("rejection %+v: listed twice, or not of the filter", r)
			}
			seen[r.Id] = true
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	if len(seen) != 5 {
		t.Errorf("%d wrong_signature refusals over the pages, want 5", len(seen))
	}
	p := c.call(http.MethodGet, "/rejections?reason=bad_mood", nil).want(t, http.StatusBadRequest).problem(t)
	if len(problemsOf(p)) == 0 || problemsOf(p)[0].Field != "reason" {
		t.Errorf("an unknown reason: %+v, want the field reason at fault", p)
	}
	c.call(http.MethodGet, "/replays?cursor=garbage", nil).want(t, http.StatusBadRequest).problem(t)
}

func cursorParam(cursor string) string {
	if cursor == "" {
		return ""
	}
	return "&cursor=" + cursor
}

// Reconcile's status says it is on and lists the runs; a run recovers the
// event hookd never saw; a second one at once finds nothing new.
func TestAPI_ReconcileRunAndStatus(t *testing.T) {
	t.Parallel()
	b := setupActions(t)
	c, _ := b.token(t, accounts.RoleOperator, tokens.ScopeOperate, "ops")
	var st api.ReconcileStatus
	c.call(http.MethodGet, "/reconcile", nil).want(t, http.StatusOK).decode(t, &st)
	if !st.Enabled || st.MaxWindowHours == nil || len(st.Runs) != 0 {
		t.Fatalf("status %+v, want on, with no run yet", st)
	}
	b.stripe.AddEvent(stripetest.Event{Type: "invoice.paid", Created: time.Now().Add(-time.Hour)})
	var run api.Reconciled
	c.call(http.MethodPost, "/reconcile", map[string]any{"hours": 24}).want(t, http.StatusOK).decode(t, &run)
	if run.Recovered != 1 || run.Examined != 1 || run.DryRun || run.Stopped != nil {
		t.Errorf("run %+v, want 1 examined and recovered", run)
	}
	if n := queuetest.Markers(t, b.pool); n != 1 {
		t.Errorf("%d events processed, want the one recovered", n)
	}
	c.call(http.MethodGet, "/reconcile", nil).want(t, http.StatusOK).decode(t, &st)
	if len(st.Runs) != 1 || st.Runs[0].Recovered != 1 || st.Runs[0].Trigger != "dashboard" {
		t.Errorf("runs %+v, want the one run, which recovered 1", st.Runs)
	}
	p := c.call(http.MethodPost, "/reconcile", map[string]any{"hours": *st.MaxWindowHours + 1}).want(t, http.StatusBadRequest).problem(t)
	if len(problemsOf(p)) == 0 || problemsOf(p)[0].Field != "hours" {
		t.Errorf("hours beyond the longest window: %+v, want the field hours at fault", p)
	}
}

// The object an event is about, as Stripe has it now, beside the event's
// snapshot; one request of Stripe's API.
func TestAPI_EventInStripe(t *testing.T) {
	t.Parallel()
	b := setupActions(t)
	c, _ := b.token(t, accounts.RoleViewer, tokens.ScopeRead, "reader")
	snapshot := `{"id":"in_api1","object":"invoice","status":"open"}`
	payload := stripeevent.Event{ID: "evt_1InStripe", Type: "invoice.finalized", Created: time.Now(), Object: []byte(snapshot)}.JSON()
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventID: "evt_1InStripe", Payload: string(payload), Status: queue.StatusDead})
	b.stripe.PutObject("", map[string]any{"id": "in_api1", "object": "invoice", "status": "paid"})
	before := b.stripe.TotalRequests()
	var got api.EventInStripe
	c.call(http.MethodGet, "/events/evt_1InStripe/stripe", nil).want(t, http.StatusOK).decode(t, &got)
	if got.Id != "evt_1InStripe" || got.Snapshot == nil || string(*got.Snapshot) != snapshot {
		t.Errorf("answer %+v, want the event's snapshot", got)
	}
	var current struct{ Status string }
	if err := json.Unmarshal(got.Current, &current); err != nil || current.Status != "paid" {
		t.Errorf("current %s, want the invoice paid", got.Current)
	}
	if n := b.stripe.TotalRequests() - before; n != 1 {
		t.Errorf("%d requests to Stripe, want 1", n)
	}
	c.call(http.MethodGet, "/events/evt_1Unknown/stripe", nil).want(t, http.StatusNotFound).problem(t)
}

// Accounts for admins: listed, added; a token's own account is refused a
// change with a 409 saying why; the removal's dry run names the account
// and removes nothing.
func TestAPI_Accounts(t *testing.T) {
	t.Parallel()
	b := setupActions(t)
	c, tok := b.token(t, accounts.RoleAdmin, tokens.ScopeAdmin, "admin-bot")
	var added api.Account
	c.call(http.MethodPost, "/accounts", map[string]any{"email": "ann@example.com", "password": "correct horse battery",
		"role": "viewer"}).want(t, http.StatusCreated).decode(t, &added)
	var list api.AccountList
	c.call(http.MethodGet, "/accounts", nil).want(t, http.StatusOK).decode(t, &list)
	if len(list.Accounts) != 2 || list.Accounts[0].Email != "admin-bot@example.com" || list.Accounts[1].Id != added.Id {
		t.Errorf("accounts %+v, want admin-bot and ann", list.Accounts)
	}
	p := c.call(http.MethodPost, "/accounts", map[string]any{"email": "ann@example.com", "password": "correct horse battery",
		"role": "viewer"}).want(t, http.StatusUnprocessableEntity).problem(t)
	t.Logf("the same email again: %s", p.Detail)
	own := strconv.FormatInt(tok.AccountID, 10)
	p = c.call(http.MethodPost, "/accounts/"+own+"/role", map[string]any{"role": "viewer"}).want(t, http.StatusConflict).problem(t)
	t.Logf("its own role: %s", p.Detail)
	var dry api.AccountRemoval
	ann := strconv.FormatInt(added.Id, 10)
	c.call(http.MethodPost, "/accounts/"+ann+"/remove", map[string]any{"dry_run": true}).want(t, http.StatusOK).decode(t, &dry)
	if !dry.DryRun || dry.Removed || dry.Account.Email != "ann@example.com" {
		t.Errorf("dry run %+v, want ann, not removed", dry)
	}
	var changed api.RoleChange
	c.call(http.MethodPost, "/accounts/"+ann+"/role", map[string]any{"role": "operator"}).want(t, http.StatusOK).decode(t, &changed)
	if !changed.Changed || changed.PreviousRole != "viewer" || changed.Account.Role != "operator" {
		t.Errorf("role change %+v, want viewer to operator", changed)
	}
	c.call(http.MethodPost, "/accounts/"+ann+"/remove", nil).want(t, http.StatusOK)
	c.call(http.MethodPost, "/accounts/"+ann+"/remove", nil).want(t, http.StatusNotFound).problem(t)
}
