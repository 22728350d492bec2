package web_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/tokens"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web/api"
)

// auditCount counts the audit entries of action naming the token.
func (b *testBundle) auditCount(t *testing.T, action string, token tokens.Token) int64 {
	t.Helper()
	return queuetest.Count(t, b.pool, `SELECT count(*) FROM audit_log WHERE action = $1 AND token_id = $2 AND token_name = $3`,
		action, token.ID, token.Name)
}

// The failure groups of the Failures page over the API, and a group's
// retry: its dry run counts and changes nothing; the retry sends the dead
// events back and makes the pending one due, one audit entry naming the
// token and the count; another group is untouched. A read token lists
// and may not retry; a blank group is a 400 naming the field.
func TestAPI_FailureGroupsAndTheirRetry(t *testing.T) {
	t.Parallel()
	b := setup(t, withAPI(lots))
	var group []queue.Event
	for i, st := range []queue.Status{queue.StatusDead, queue.StatusDead, queue.StatusFailed} {
		group = append(group, queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{Status: st, Attempts: 3, DueIn: time.Hour,
			LastError: fmt.Sprintf("dial tcp 10.0.0.%d:443: connection refused", i+1)}))
	}
	apart := queuetest.InsertEvent(t, b.pool, queuetest.EventOpts{EventType: "customer.created", Status: queue.StatusDead,
		LastError: "the app answered 500"})
	readSecret, _ := b.apiToken(t, accounts.RoleViewer, tokens.ScopeRead, "reader")
	opSecret, op := b.apiToken(t, accounts.RoleOperator, tokens.ScopeOperate, "deployer")
	reader, operator := b.api(t, readSecret), b.api(t, opSecret)

	var list api.FailureGroupList
	reader.call(http.MethodGet, "/failures", nil).want(t, http.StatusOK).decode(t, &list)
	if list.Total != 2 || len(list.Groups) != 2 {
		t.Fatalf("failure groups %+v, want 2", list)
	}
	g := list.Groups[0]
	if g.Dead != 2 || g.Failed != 1 || g.Id != api.GroupID(g.Destination, g.ErrorGroup) || len(g.Id) != 12 ||
		g.Destination != queue.DefaultDestination ||
		len(g.Types) != 1 || g.Types[0].Type != "invoice.paid" || g.Types[0].Count != 3 {
		t.Fatalf("the largest group %+v", g)
	}
	reader.call(http.MethodGet, "/failures?type=customer.created", nil).want(t, http.StatusOK).decode(t, &list)
	if list.Total != 1 || list.Groups[0].Dead != 1 || list.Groups[0].ErrorGroup == g.ErrorGroup {
		t.Fatalf("customer.created's groups %+v", list)
	}
	reader.call(http.MethodPost, "/failures/retry", map[string]any{"group": g.ErrorGroup}).want(t, http.StatusForbidden).problem(t)

	var dry api.GroupRetry
	operator.call(http.MethodPost, "/failures/retry", map[string]any{"group": g.ErrorGroup, "dry_run": true}).
		want(t, http.StatusOK).decode(t, &dry)
	if !dry.DryRun || dry.Count != 3 || *dry.Dead != 2 || *dry.Pending != 1 || dry.Queued != nil || len(*dry.Types) != 1 {
		t.Fatalf("dry run %+v", dry)
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM webhook_events WHERE status = 'dead'`); n != 3 || b.auditCount(t, "retry_group", op) != 0 {
		t.Fatalf("after the dry run: %d dead, %d audit entries; want 3 and none", n, b.auditCount(t, "retry_group", op))
	}

	var done api.GroupRetry
	operator.call(http.MethodPost, "/failures/retry", map[string]any{"group": g.ErrorGroup}).want(t, http.StatusOK).decode(t, &done)
	if done.DryRun || done.Count != 3 || *done.Queued != 2 || *done.DueNow != 1 || *done.DueAfterAttempt != 0 || *done.Erased != 0 {
		t.Fatalf("retry %+v", done)
	}
	for _, e := range group {
		got, err := b.store.Event(context.Background(), e.ID)
		if err != nil || got.Status == queue.StatusDead || got.NextRetryAt.After(time.Now().Add(time.Second)) || !got.ManualRetry {
			t.Errorf("%s after the group's retry: %s due %s, manual %t (%v)", e.EventID, got.Status, got.NextRetryAt, got.ManualRetry, err)
		}
	}
	if got, _ := b.store.Event(context.Background(), apart.ID); got.Status != queue.StatusDead {
		t.Errorf("the other group's event is %s", got.Status)
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM audit_log WHERE action = 'retry_group' AND token_id = $1
		AND count = 3 AND user_email = 'deployer@example.com'`, op.ID); n != 1 {
		t.Errorf("%d retry_group entries naming the token with count 3, want 1", n)
	}

	p := operator.callInvalid(http.MethodPost, "/failures/retry", map[string]any{"group": ""}).want(t, http.StatusBadRequest).problem(t)
	if p.Errors == nil || (*p.Errors)[0].Field != "group" {
		t.Errorf("an empty group: %+v", p)
	}
	p = operator.call(http.MethodPost, "/failures/retry", map[string]any{"group": "   "}).want(t, http.StatusBadRequest).problem(t)
	if p.Errors == nil || (*p.Errors)[0].Field != "group" {
		t.Errorf("a blank group: %+v", p)
	}
}

// A replay over the API: its dry run previews, its start answers 202
// with its progress URL (also in Location), which a read token follows;
// one audit entry names the token. Refused: a read token's start (403), a
// time range backwards or no name (400, naming the field), a filter
// matching nothing (422), an unknown replay (404).
func TestAPI_ReplayStartsAndShowsItsProgress(t *testing.T) {
	t.Parallel()
	b := setup(t, withAPI(lots))
	queuetest.InsertLogged(t, b.pool, []queuetest.LoggedOpts{{}, {}, {EventType: "customer.created"}})
	readSecret, _ := b.apiToken(t, accounts.RoleViewer, tokens.ScopeRead, "reader")
	opSecret, op := b.apiToken(t, accounts.RoleOperator, tokens.ScopeOperate, "deployer")
	reader, operator := b.api(t, readSecret), b.api(t, opSecret)
	from, to := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), time.Now().Add(time.Hour).UTC().Format(time.RFC3339)

	var preview api.ReplayPreview
	operator.call(http.MethodPost, "/replays", map[string]any{"from": from, "to": to, "types": []string{"invoice.*"}, "dry_run": true}).
		want(t, http.StatusOK).decode(t, &preview)
	if preview.Matching != 2 || preview.Replayable != 2 || len(preview.Sample) != 2 || preview.Sample[0].Status != api.ReplayStatusProcessed {
		t.Fatalf("preview %+v", preview)
	}
	if n := queuetest.Count(t, b.pool, `SELECT count(*) FROM replays`); n != 0 {
		t.Fatalf("%d replays after a dry run", n)
	}
	reader.call(http.MethodPost, "/replays", map[string]any{"name": "fix", "from": from, "to": to}).want(t, http.StatusForbidden).problem(t)

	res := operator.call(http.MethodPost, "/replays", map[string]any{"name": "app fix 7", "from": from, "to": to,
		"statuses": []string{"processed", "pending"}}).want(t, http.StatusAccepted)
	var started api.Replay
	res.decode(t, &started)
	if started.Total != 3 || started.State != api.Running || started.Name != "app fix 7" ||
		started.ProgressUrl != fmt.Sprintf("/api/v1/replays/%d", started.Id) || res.header.Get("Location") != started.ProgressUrl {
		t.Fatalf("started %+v, Location %q", started, res.header.Get("Location"))
	}
	var progress api.Replay
	reader.call(http.MethodGet, strings.TrimPrefix(started.ProgressUrl, api.Prefix), nil).want(t, http.StatusOK).decode(t, &progress)
	if progress.Id != started.Id || progress.Total != 3 || progress.CreatedBy != "deployer@example.com (API token deployer)" {
		t.Errorf("progress %+v", progress)
	}
	if n := b.auditCount(t, "replay_start", op); n != 1 {
		t.Errorf("%d replay_start entries naming the token, want 1", n)
	}

	for field, body := range map[string]map[string]any{
		"from": {"name": "backwards", "from": to, "to": from},
		"name": {"from": from, "to": to},
	} {
		p := operator.call(http.MethodPost, "/replays", body).want(t, http.StatusBadRequest).problem(t)
		if p.Errors == nil || (*p.Errors)[0].Field != field || !strings.HasPrefix(p.Detail, "Nothing started: ") {
			t.Errorf("%v: %+v, want a 400 naming %s", body, p, field)
		}
	}
	p := operator.call(http.MethodPost, "/replays", map[string]any{"name": "none", "from": from, "to": to, "types": []string{"payout.paid"}}).
		want(t, http.StatusUnprocessableEntity).problem(t)
	if p.Type != "urn:hookd:problem:nothing-to-replay" {
		t.Errorf("a filter matching nothing: %+v", p)
	}
	reader.call(http.MethodGet, "/replays/99999", nil).want(t, http.StatusNotFound).problem(t)
}

// Tokens over the API are for admins: an operate token may neither list
// nor revoke them; an admin token lists every account's and revokes one,
// audited, which is refused from then on; a second revoke is a 409, an
// unknown id a 404.
func TestAPI_TokensListedAndRevokedByAdmins(t *testing.T) {
	t.Parallel()
	b := setup(t, withAPI(lots))
	adminSecret, admin := b.apiToken(t, accounts.RoleAdmin, tokens.ScopeAdmin, "root")
	opSecret, op := b.apiToken(t, accounts.RoleOperator, tokens.ScopeOperate, "deployer")
	root, operator := b.api(t, adminSecret), b.api(t, opSecret)

	operator.call(http.MethodGet, "/tokens", nil).want(t, http.StatusForbidden).problem(t)
	operator.call(http.MethodPost, fmt.Sprintf("/tokens/%d/revoke", op.ID), nil).want(t, http.StatusForbidden).problem(t)

	var list api.TokenList
	root.call(http.MethodGet, "/tokens", nil).want(t, http.StatusOK).decode(t, &list)
	if len(list.Tokens) != 2 {
		t.Fatalf("tokens %+v, want the two", list)
	}
	for _, tk := range list.Tokens {
		if (tk.Id == op.ID && (tk.Scope != api.Operate || tk.AccountEmail != "deployer@example.com")) || tk.RevokedAt != nil {
			t.Errorf("token %+v", tk)
		}
	}

	var revoked api.Token
	root.call(http.MethodPost, fmt.Sprintf("/tokens/%d/revoke", op.ID), nil).want(t, http.StatusOK).decode(t, &revoked)
	if revoked.Id != op.ID || revoked.RevokedAt == nil {
		t.Fatalf("revoked %+v", revoked)
	}
	operator.call(http.MethodGet, "/events", nil).want(t, http.StatusUnauthorized).problem(t)
	root.call(http.MethodPost, fmt.Sprintf("/tokens/%d/revoke", op.ID), nil).want(t, http.StatusConflict).problem(t)
	root.call(http.MethodPost, "/tokens/99999/revoke", nil).want(t, http.StatusNotFound).problem(t)
	if n := b.auditCount(t, "token_revoke", admin); n != 1 {
		t.Errorf("%d token_revoke entries naming the admin's token, want 1", n)
	}
}
