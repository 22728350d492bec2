package web_test

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/internal/store/tokens"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web/api"
)

// The same Idempotency-Key twice is one retry: the second request gets
// the first answer, status and body, marked replayed. The key on another
// request is a 422, and changes nothing.
func TestAPI_IdempotencyKeyTwiceIsOneRetry(t *testing.T) {
	t.Parallel()
	b := setup(t, withAPI(lots))
	dead := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5})
	secret, _ := b.apiToken(t, accounts.RoleOperator, tokens.ScopeOperate, "runbook")
	c := b.api(t, secret)

	first := c.call(http.MethodPost, "/events/"+dead.EventID+"/retry", nil, "Idempotency-Key", "k1").want(t, http.StatusOK)
	again := c.call(http.MethodPost, "/events/"+dead.EventID+"/retry", nil, "Idempotency-Key", "k1").want(t, http.StatusOK)
	if !bytes.Equal(first.body, again.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("second answer %s (replayed %q), want the first's, %s, replayed", again.body,
			again.header.Get("Idempotent-Replayed"), first.body)
	}
	if n := countAudit(t, b, audit.Retry); n != 1 {
		t.Fatalf("%d retries audited, want 1", n)
	}
	// Without the key, the same retry is a second action: the event is no
	// longer dead, which the 409 says.
	c.call(http.MethodPost, "/events/"+dead.EventID+"/retry", nil).want(t, http.StatusConflict).problem(t)

	c.call(http.MethodPost, "/delivery/pause", map[string]string{"reason": "a"}, "Idempotency-Key", "k2").want(t, http.StatusOK)
	p := c.call(http.MethodPost, "/delivery/pause", map[string]string{"reason": "b"}, "Idempotency-Key", "k2").
		want(t, http.StatusUnprocessableEntity).problem(t)
	if p.Errors == nil || (*p.Errors)[0].Field != "Idempotency-Key" {
		t.Errorf("422 %+v, want it to name the Idempotency-Key", p)
	}
	c.call(http.MethodPost, "/events/"+dead.EventID+"/retry-now", nil, "Idempotency-Key", "k2").want(t, http.StatusUnprocessableEntity)
	if n := countAudit(t, b, audit.DeliveryPause); n != 1 {
		t.Fatalf("%d pauses audited, want 1", n)
	}
	// Keys are the token's own: another token's k1 is its own request.
	other, _ := b.apiToken(t, accounts.RoleOperator, tokens.ScopeOperate, "other")
	b.api(t, other).call(http.MethodPost, "/delivery/resume", nil, "Idempotency-Key", "k1").want(t, http.StatusOK)
}

// Many requests with one Idempotency-Key at once: exactly one retry
// happens; every other request gets a 409 (the first still running) or
// the first one's answer.
func TestAPI_IdempotencyKeyRaceIsOneRetry(t *testing.T) {
	t.Parallel()
	b := setup(t, withAPI(lots))
	dead := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5})
	secret, _ := b.apiToken(t, accounts.RoleOperator, tokens.ScopeOperate, "racer")
	c := b.api(t, secret)

	const n = 24
	answers := make([]apiResponse, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			answers[i] = c.call(http.MethodPost, "/events/"+dead.EventID+"/retry", nil, "Idempotency-Key", "race")
		})
	}
	close(start)
	wg.Wait()

	var ok, running, replayed int
	var body []byte
	for _, r := range answers {
		switch {
		case r.status == http.StatusOK && r.header.Get("Idempotent-Replayed") == "true":
			replayed++
		case r.status == http.StatusOK:
			ok++
			body = r.body
		case r.status == http.StatusConflict:
			if p := r.problem(t); p.Type != "urn:hookd:problem:idempotency-key-running" {
				t.Errorf("409 of type %s, want the key's", p.Type)
			}
			running++
		default:
			t.Fatalf("answer %d: %s", r.status, r.body)
		}
	}
	for _, r := range answers {
		if r.status == http.StatusOK && !bytes.Equal(r.body, body) {
			t.Errorf("answer %s differs from the first %s", r.body, body)
		}
	}
	t.Logf("%d requests: %d ran, %d got its answer again, %d were told it was running", n, ok, replayed, running)
	if ok != 1 || ok+replayed+running != n {
		t.Fatalf("%d requests ran the retry, want exactly 1", ok)
	}
	if got := countAudit(t, b, audit.Retry); got != 1 {
		t.Fatalf("%d retries audited, want 1", got)
	}
}

// Errors are problems: echo's own 404 and 405 under /api/v1, a parameter
// the document refuses (with the field), and an action's own refusal.
func TestAPI_ErrorsAreProblems(t *testing.T) {
	t.Parallel()
	b := setup(t, withAPI(lots))
	secret, _ := b.apiToken(t, accounts.RoleOperator, tokens.ScopeOperate, "errs")
	c := b.api(t, secret)

	c.callInvalid(http.MethodGet, "/nothing-here", nil).want(t, http.StatusNotFound).problem(t)
	c.callInvalid(http.MethodDelete, "/events", nil).want(t, http.StatusMethodNotAllowed).problem(t)
	c.call(http.MethodGet, "/events/evt_never_seen", nil).want(t, http.StatusNotFound).problem(t)

	p := c.callInvalid(http.MethodGet, "/events?status=lost&limit=0", nil).want(t, http.StatusBadRequest).problem(t)
	fields := map[string]bool{}
	for _, f := range problemsOf(p) {
		fields[f.Field] = true
	}
	if !fields["status"] || !fields["limit"] {
		t.Errorf("400 %s, want a problem for status and one for limit", mustJSON(p))
	}
	p = c.callInvalid(http.MethodPost, "/delivery/pause", map[string]string{"reason": ""}).want(t, http.StatusBadRequest).problem(t)
	if errs := problemsOf(p); len(errs) != 1 || errs[0].Field != "reason" {
		t.Errorf("400 %s, want one problem, with reason", mustJSON(p))
	}
	// Blank once its spaces are gone: the action's own rule.
	p = c.call(http.MethodPost, "/delivery/pause", map[string]string{"reason": "   "}).want(t, http.StatusBadRequest).problem(t)
	if errs := problemsOf(p); len(errs) != 1 || errs[0].Field != "reason" {
		t.Errorf("400 %s, want one problem, with reason", mustJSON(p))
	}
	c.call(http.MethodGet, "/events?cursor=bm90LWEtY3Vyc29y", nil).want(t, http.StatusBadRequest).problem(t)
}

// Past its rate a token gets a 429 with Retry-After; another token is
// not held back by it.
func TestAPI_RateLimitIsPerToken(t *testing.T) {
	t.Parallel()
	b := setup(t, withAPI(0.5)) // a burst of one, then one every 2 s
	first, _ := b.apiToken(t, accounts.RoleViewer, tokens.ScopeRead, "first")
	second, _ := b.apiToken(t, accounts.RoleViewer, tokens.ScopeRead, "second")
	c := b.api(t, first)
	c.call(http.MethodGet, "/events", nil).want(t, http.StatusOK)
	r := c.call(http.MethodGet, "/events", nil).want(t, http.StatusTooManyRequests)
	r.problem(t)
	if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q, want a number of seconds", r.header.Get("Retry-After"))
	}
	b.api(t, second).call(http.MethodGet, "/events", nil).want(t, http.StatusOK)
}

// The event list pages by cursor: every event once, in the list's order,
// and the last page has no next cursor.
func TestAPI_EventsPageByCursor(t *testing.T) {
	t.Parallel()
	b := setup(t, withAPI(lots))
	want := map[string]bool{}
	for range 5 {
		want[queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5}).EventID] = true
	}
	queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusFailed})
	secret, _ := b.apiToken(t, accounts.RoleViewer, tokens.ScopeRead, "pager")
	c := b.api(t, secret)

	seen, pages := map[string]bool{}, 0
	path := "/events?limit=2"
	for {
		var l api.EventList
		c.call(http.MethodGet, path, nil).want(t, http.StatusOK).decode(t, &l)
		pages++
		for _, e := range l.Events {
			if seen[e.Id] || !want[e.Id] {
				t.Fatalf("page %d lists %s, seen already or not dead", pages, e.Id)
			}
			seen[e.Id] = true
		}
		if l.Total != 5 {
			t.Errorf("total %d, want 5", l.Total)
		}
		if l.NextCursor == nil {
			break
		}
		path = "/events?limit=2&cursor=" + *l.NextCursor
	}
	if len(seen) != 5 || pages != 3 {
		t.Fatalf("%d events over %d pages, want 5 over 3", len(seen), pages)
	}
	// A dead list's cursor is no cursor of the pending list.
	var l api.EventList
	c.call(http.MethodGet, "/events?limit=2", nil).decode(t, &l)
	c.call(http.MethodGet, "/events?status=pending&cursor="+*l.NextCursor, nil).want(t, http.StatusBadRequest).problem(t)
}

// problemsOf is p's field problems, none when it lists none.
func problemsOf(p api.Problem) []api.FieldProblem {
	if p.Errors == nil {
		return nil
	}
	return *p.Errors
}

// The same Idempotency-Key while the first request is still running (its
// retry held here by a lock on the event's row) is a 409; once the first
// is answered, the key gives its answer. One retry in all.
func TestAPI_IdempotencyKeyWhileRunningIs409(t *testing.T) {
	t.Parallel()
	b := setup(t, withAPI(lots))
	ctx := context.Background()
	dead := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5})
	secret, _ := b.apiToken(t, accounts.RoleOperator, tokens.ScopeOperate, "slow")
	c := b.api(t, secret)
	path := "/events/" + dead.EventID + "/retry"

	lock, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if _, err := lock.Exec(ctx, `SELECT 1 FROM webhook_events WHERE id = $1 FOR UPDATE`, dead.ID); err != nil {
		t.Fatal(err)
	}
	first := make(chan apiResponse, 1)
	go func() { first <- c.call(http.MethodPost, path, nil, "Idempotency-Key", "slow") }()
	queuetest.WaitFor(t, 10*time.Second, "the first request to hold its key", func() bool {
		var n int
		err := b.pool.QueryRow(ctx, `SELECT count(*) FROM api_idempotency WHERE key = 'slow' AND status IS NULL`).Scan(&n)
		return err == nil && n == 1
	})
	p := c.call(http.MethodPost, path, nil, "Idempotency-Key", "slow").want(t, http.StatusConflict).problem(t)
	if p.Type != "urn:hookd:problem:idempotency-key-running" {
		t.Errorf("409 of type %s, want the key's", p.Type)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	answered := (<-first).want(t, http.StatusOK)
	again := c.call(http.MethodPost, path, nil, "Idempotency-Key", "slow").want(t, http.StatusOK)
	if !bytes.Equal(again.body, answered.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("after the first answer: %s, want it again, replayed", again.body)
	}
	if n := countAudit(t, b, audit.Retry); n != 1 {
		t.Fatalf("%d retries audited, want 1", n)
	}
}
