package web_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/internal/store/tokens"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web/api"
)

// lots is a rate no test reaches.
const lots = 10_000

// The document the API serves is the one committed, byte for byte, and a
// valid OpenAPI document.
func TestAPI_ServedDocumentIsTheCommittedOne(t *testing.T) {
	t.Parallel()
	b := setup(t, withAPI(lots))
	committed, err := os.ReadFile("api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if served := b.servedDoc(t); !bytes.Equal(served.raw, committed) {
		t.Fatal("GET /api/v1/openapi.json differs from web/api/openapi.json: run make api")
	}
}

// writes are every write of the API, on ev (a dead event's id).
func writes(ev string) []struct {
	path string
	body any
} {
	return []struct {
		path string
		body any
	}{
		{"/events/" + ev + "/retry", nil},
		{"/events/" + ev + "/retry-now", nil},
		{"/delivery/pause", map[string]string{"reason": "deploy"}},
		{"/delivery/resume", nil},
		{"/failures/retry", map[string]string{"group": "downstream returned <n>"}},
		{"/replays", map[string]string{"name": "fix", "from": "2026-01-01T00:00:00Z", "to": "2036-01-01T00:00:00Z"}},
		{"/tokens/1/revoke", nil},
	}
}

// A read token lists the events, reads one with its attempts and payload
// and reads the audit log; every write is a 403 that changes nothing.
func TestAPI_ReadTokenReadsAndIsRefusedEveryWrite(t *testing.T) {
	t.Parallel()
	b := setup(t, withAPI(lots))
	dead := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5})
	secret, _ := b.apiToken(t, accounts.RoleViewer, tokens.ScopeRead, "reader")
	c := b.api(t, secret)

	var list api.EventList
	c.call(http.MethodGet, "/events?status=dead", nil).want(t, http.StatusOK).decode(t, &list)
	if len(list.Events) != 1 || list.Events[0].Id != dead.EventID || list.Total != 1 || list.NextCursor != nil {
		t.Fatalf("dead list %+v, want %s alone on one page", list, dead.EventID)
	}
	var detail api.EventDetail
	c.call(http.MethodGet, "/events/"+dead.EventID, nil).want(t, http.StatusOK).decode(t, &detail)
	if detail.Id != dead.EventID || detail.Payload != dead.Payload || detail.Status != api.EventStatus(queue.StatusDead) {
		t.Fatalf("event %+v, want %s dead with its payload", detail, dead.EventID)
	}
	c.call(http.MethodGet, "/audit", nil).want(t, http.StatusOK)

	for _, w := range writes(dead.EventID) {
		p := c.call(http.MethodPost, w.path, w.body).want(t, http.StatusForbidden).problem(t)
		t.Logf("POST %s: %s", w.path, p.Detail)
	}
	if got, _ := b.store.Event(context.Background(), dead.ID); got.Status != queue.StatusDead {
		t.Errorf("event %s after the refused writes, want dead", got.Status)
	}
	if n := len(auditEntries(t, b)); n != 0 {
		t.Errorf("%d audit entries after the refused writes, want none", n)
	}
}

// An operate token retries, retries now, pauses and resumes; each write is
// exactly one audit entry naming the token, its account and the target,
// which GET /audit shows too.
func TestAPI_OperateTokenActsAndEachWriteIsAudited(t *testing.T) {
	t.Parallel()
	b := setup(t, withAPI(lots))
	ctx := context.Background()
	dead := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5})
	pending := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusRetrying, Attempts: 2, DueIn: time.Hour})
	secret, tok := b.apiToken(t, accounts.RoleOperator, tokens.ScopeOperate, "deploy-bot")
	c := b.api(t, secret)

	steps := []struct {
		path   string
		body   any
		action audit.Action
		target string
	}{
		{"/events/" + dead.EventID + "/retry", nil, audit.Retry, dead.EventID},
		{"/events/" + pending.EventID + "/retry-now", nil, audit.RetryNow, pending.EventID},
		{"/delivery/pause", map[string]string{"reason": "deploying v2"}, audit.DeliveryPause, "deploying v2"},
		{"/delivery/resume", nil, audit.DeliveryResume, "pause"},
	}
	for i, s := range steps {
		c.call(http.MethodPost, s.path, s.body).want(t, http.StatusOK)
		entries := auditEntries(t, b)
		if len(entries) != i+1 {
			t.Fatalf("after POST %s: %d audit entries, want %d", s.path, len(entries), i+1)
		}
		e := entries[0]
		if e.Action != s.action || e.Target != s.target || e.TokenID != tok.ID || e.TokenName != "deploy-bot" ||
			e.AccountID != tok.AccountID || e.Email != tok.AccountEmail {
			t.Errorf("POST %s audited as %+v; want %s on %s by token %d (deploy-bot) of account %d",
				s.path, e, s.action, s.target, tok.ID, tok.AccountID)
		}
	}
	if got, _ := b.store.Event(ctx, dead.ID); got.Status != queue.StatusFailed || !got.ManualRetry {
		t.Errorf("retried event %s (manual %v), want failed and manual", got.Status, got.ManualRetry)
	}
	if got, _ := b.store.Event(ctx, pending.ID); !got.NextRetryAt.Before(time.Now().Add(time.Minute)) {
		t.Errorf("retried-now event due %s, want due now", got.NextRetryAt)
	}

	var log api.AuditList
	c.call(http.MethodGet, "/audit?limit=2", nil).want(t, http.StatusOK).decode(t, &log)
	if len(log.Entries) != 2 || log.NextCursor == nil || log.Entries[0].TokenId == nil || *log.Entries[0].TokenId != tok.ID ||
		*log.Entries[0].TokenName != "deploy-bot" || log.Entries[0].Action != string(audit.DeliveryResume) {
		t.Fatalf("GET /audit?limit=2: %s", mustJSON(log))
	}
	var rest api.AuditList
	c.call(http.MethodGet, "/audit?limit=2&cursor="+*log.NextCursor, nil).want(t, http.StatusOK).decode(t, &rest)
	if len(rest.Entries) != 2 || rest.Entries[1].Action != string(audit.Retry) || rest.Entries[1].Target != dead.EventID {
		t.Fatalf("second page of /audit: %s", mustJSON(rest))
	}
	// The dashboard's audit page names the token too.
	browser := b.client(t)
	browser.signIn(accounts.RoleViewer)
	page := browser.get("/audit")
	wantStatus(t, page, http.StatusOK)
	if got, want := testid(page.doc, "audit-token"), fmt.Sprintf("via API token deploy-bot (token %d)", tok.ID); !strings.Contains(got, want) {
		t.Errorf("audit page says %q of the token, want %q", got, want)
	}
}

// No token, a malformed or unknown one, an expired one, a revoked one, one
// of a removed account and an operate token of an operator demoted to
// viewer: each a 401 asking for a bearer token, changing nothing.
func TestAPI_RefusedTokensAre401(t *testing.T) {
	t.Parallel()
	b := setup(t, withAPI(lots))
	ctx := context.Background()
	dead := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5})
	admin, err := b.accounts.CreateUser(ctx, "admin@example.com", testPassword, accounts.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	expired, tok := b.apiToken(t, accounts.RoleOperator, tokens.ScopeOperate, "expired")
	if _, err := b.pool.Exec(ctx, `UPDATE api_tokens SET created_at = now() - interval '2 days', expires_at = now() - interval '1 second' WHERE id = $1`, tok.ID); err != nil {
		t.Fatal(err)
	}
	revoked, tok := b.apiToken(t, accounts.RoleOperator, tokens.ScopeOperate, "revoked")
	b.inTx(t, func(tx *accounts.Tx) error { _, err := tokens.New(b.pool).Revoke(ctx, tx.PgxTx(), tok.ID); return err })
	leaver, tok := b.apiToken(t, accounts.RoleOperator, tokens.ScopeOperate, "leaver")
	b.inTx(t, func(tx *accounts.Tx) error { _, err := tx.RemoveUser(ctx, admin.ID, tok.AccountID); return err })
	demoted, tok := b.apiToken(t, accounts.RoleOperator, tokens.ScopeOperate, "demoted")
	b.inTx(t, func(tx *accounts.Tx) error {
		_, err := tx.SetRole(ctx, admin.ID, tok.AccountID, accounts.RoleViewer)
		return err
	})

	for name, secret := range map[string]string{"none": "", "unknown": "hkd_0000000000000000000000000000000000000000000",
		"expired": expired, "revoked": revoked, "removed account": leaver, "demoted to viewer": demoted} {
		c := b.api(t, secret)
		for _, r := range []apiResponse{
			c.call(http.MethodGet, "/events", nil),
			c.call(http.MethodPost, "/events/"+dead.EventID+"/retry", nil),
		} {
			p := r.want(t, http.StatusUnauthorized).problem(t)
			if r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: a 401 without WWW-Authenticate", name)
			}
			t.Logf("%s: %s", name, p.Detail)
		}
	}
	if got, _ := b.store.Event(ctx, dead.ID); got.Status != queue.StatusDead {
		t.Errorf("event %s after the refused retries, want dead", got.Status)
	}
	for _, e := range auditEntries(t, b) {
		if e.Action == audit.Retry {
			t.Errorf("a refused token's retry was audited: %+v", e)
		}
	}
}

// A browser signed in to the dashboard, as an admin, gets a 401 from the
// API with its session cookie alone: the cookie never authorizes it.
func TestAPI_SessionCookieAloneIs401(t *testing.T) {
	t.Parallel()
	b := setup(t, withAPI(lots))
	dead := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 5})
	browser := b.client(t)
	browser.signIn(accounts.RoleAdmin)
	c := b.api(t, "")
	c.hc = browser.http
	c.call(http.MethodGet, "/events", nil).want(t, http.StatusUnauthorized).problem(t)
	c.call(http.MethodPost, "/events/"+dead.EventID+"/retry", nil).want(t, http.StatusUnauthorized).problem(t)
	if got, _ := b.store.Event(context.Background(), dead.ID); got.Status != queue.StatusDead {
		t.Errorf("event %s, want dead", got.Status)
	}
}

func (b *testBundle) inTx(t *testing.T, fn func(tx *accounts.Tx) error) {
	t.Helper()
	if err := b.accounts.InTx(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}
