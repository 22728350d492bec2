package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/cli"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web/api/apiclient"
)

// cliRig is the built hookd serving on a fresh database, forwarding to an
// app that counts what it gets, and the same binary as the command line
// against it.
type cliRig struct {
	t      *testing.T
	bin    string
	bundle *testBundle
	server *hookdProcess
	app    *countingApp
}

func newCLIRig(t *testing.T) *cliRig {
	t.Helper()
	r := &cliRig{t: t, bin: buildHookdBinary(t), bundle: setup(t), app: newCountingApp(t)}
	r.server = startHookdProcess(t, r.bin, []string{"DATABASE_URL=" + r.bundle.dbURL, "STRIPE_WEBHOOK_SECRET=" + testSecret,
		"HOOKD_FORWARD_URL=" + r.app.srv.URL})
	t.Cleanup(func() {
		if err := r.server.terminate(); err != nil {
			t.Errorf("stop hookd: %v\n%s", err, r.server.log)
		}
		if t.Failed() {
			t.Logf("hookd:\n%s", r.server.log)
		}
	})
	return r
}

// run runs the binary with args, env (NAME=value) and stdin, and no
// HOOKD_ setting of the developer's, and returns its stdout, stderr and
// exit code.
func (r *cliRig) run(env []string, stdin string, args ...string) (string, string, int) {
	r.t.Helper()
	cmd := exec.Command(r.bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOOKD_") && !strings.HasPrefix(kv, "STRIPE_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		r.t.Fatalf("hookd %s: %v", strings.Join(args, " "), err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// api runs hookd args against the rig's hookd with token, and fails the
// test unless it exits 0.
func (r *cliRig) api(token string, args ...string) (string, string) {
	r.t.Helper()
	out, errOut, code := r.run(r.apiEnv(token), "", args...)
	if code != cli.ExitDone {
		r.t.Fatalf("hookd %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out, errOut
}

func (r *cliRig) apiEnv(token string) []string {
	return []string{"HOOKD_API_URL=" + r.server.base, "HOOKD_API_TOKEN=" + token}
}

// apiJSON runs hookd args --json and decodes its stdout into v.
func (r *cliRig) apiJSON(v any, token string, args ...string) {
	r.t.Helper()
	out, _ := r.api(token, append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		r.t.Fatalf("hookd %s --json printed no JSON of %T: %v\n%s", strings.Join(args, " "), v, err, out)
	}
}

// account adds a dashboard account of role and makes it a token of
// scope with `hookd tokens create`, on the database, and returns its
// secret.
func (r *cliRig) account(email, role, scope string) string {
	r.t.Helper()
	db := []string{"DATABASE_URL=" + r.bundle.dbURL}
	if out, errOut, code := r.run(db, "long enough\n", "user", "add", email, "-role", role); code != 0 {
		r.t.Fatalf("user add %s: exit %d\n%s%s", email, code, out, errOut)
	}
	out, errOut, code := r.run(db, "", "tokens", "create", "--name", role+" token", "--scope", scope, "--account", email)
	if code != 0 {
		r.t.Fatalf("tokens create: exit %d\n%s", code, errOut)
	}
	return strings.TrimSpace(out)
}

// countingApp is the app hookd forwards to: it answers 200 and counts
// the events it gets, and those that came in a replay.
type countingApp struct {
	srv      *httptest.Server
	mu       sync.Mutex
	events   map[string]int
	replayed map[string]int
}

func newCountingApp(t *testing.T) *countingApp {
	a := &countingApp{events: map[string]int{}, replayed: map[string]int{}}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		a.mu.Lock()
		a.events[req.Header.Get("Hookd-Event-Id")]++
		if name := req.Header.Get("Hookd-Replay"); name != "" {
			a.replayed[name]++
		}
		a.mu.Unlock()
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *countingApp) got(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.events[id]
}

func (a *countingApp) replays(name string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.replayed[name]
}

// The command line against a running hookd, through /api/v1, with tokens
// made by `hookd tokens create`: events list (all, by type, as a table),
// show, retry; pause, and resume, after which the retried events reach
// the app; each change one audit entry naming the token.
func TestCLI_EventsPauseAndResumeAgainstARunningHookd(t *testing.T) {
	t.Parallel()
	r := newCLIRig(t)
	operate := r.account("ops@example.com", "operator", "operate")
	refused := queuetest.InsertEvent(t, r.bundle.pool, queuetest.EventOpts{EventType: "invoice.paid", Status: queue.StatusDead,
		Attempts: 12, LastError: "dial tcp 10.0.0.7:443: connection refused"})
	timedOut := queuetest.InsertEvent(t, r.bundle.pool, queuetest.EventOpts{EventType: "invoice.paid", Status: queue.StatusDead,
		Attempts: 12, LastError: "dial tcp 10.0.0.9:443: connection refused"})
	other := queuetest.InsertEvent(t, r.bundle.pool, queuetest.EventOpts{EventType: "customer.created", Status: queue.StatusDead,
		Attempts: 12, LastError: "the app answered 500"})

	var list apiclient.EventList
	r.apiJSON(&list, operate, "events", "list")
	if got := eventIDs(list); list.Total != 3 || !slices.Equal(got, sorted(refused.EventID, timedOut.EventID, other.EventID)) {
		t.Fatalf("events list --json: total %d, ids %v", list.Total, got)
	}
	r.apiJSON(&list, operate, "events", "list", "--type", "invoice.paid", "--status", "dead")
	if got := eventIDs(list); list.Total != 2 || !slices.Equal(got, sorted(refused.EventID, timedOut.EventID)) {
		t.Fatalf("events list --type invoice.paid --json: total %d, ids %v", list.Total, got)
	}
	table, summary := r.api(operate, "events", "list")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 4 || !slices.Equal(strings.Fields(lines[0])[:4], []string{"ID", "TYPE", "STATUS", "ATTEMPTS"}) ||
		!slices.ContainsFunc(lines[1:], func(l string) bool {
			return slices.Equal(strings.Fields(l)[:4], []string{other.EventID, "customer.created", "dead", "12"})
		}) || summary != "3 of 3 dead events\n" {
		t.Errorf("events list printed\n%s\nand said %q", table, summary)
	}

	var ev apiclient.EventDetail
	r.apiJSON(&ev, operate, "events", "show", other.EventID)
	if ev.Id != other.EventID || ev.Status != apiclient.EventStatusDead || ev.Attempts != 12 ||
		!strings.Contains(ev.Payload, other.EventID) || ev.LastError == nil || *ev.LastError != "the app answered 500" {
		t.Errorf("events show --json = %+v", ev)
	}

	var d apiclient.Delivery
	r.apiJSON(&d, operate, "pause", "--reason", "deploy 42")
	if !d.Paused || !d.Changed || d.PausedReason == nil || *d.PausedReason != "deploy 42" ||
		d.PausedBy == nil || !strings.Contains(*d.PausedBy, "ops@example.com (API token operator token)") {
		t.Fatalf("pause --json = %+v", d)
	}
	var retried []apiclient.EventAction
	r.apiJSON(&retried, operate, "events", "retry", refused.EventID, other.EventID)
	if len(retried) != 2 || retried[0].Id != refused.EventID || retried[1].Id != other.EventID || retried[1].Result != "queued for retry" {
		t.Fatalf("events retry --json = %+v", retried)
	}
	for _, id := range []string{refused.EventID, other.EventID} {
		if status, _ := statusOf(t, r.bundle, id); status == string(queue.StatusDead) {
			t.Errorf("%s is still dead after events retry", id)
		}
	}

	r.apiJSON(&d, operate, "resume")
	if d.Paused || !d.Changed {
		t.Fatalf("resume --json = %+v", d)
	}
	queuetest.WaitFor(t, time.Minute, "the retried events to reach the app and leave the queue", func() bool {
		a, _ := statusOf(t, r.bundle, refused.EventID)
		b, _ := statusOf(t, r.bundle, other.EventID)
		return a == "" && b == "" && r.app.got(refused.EventID) == 1 && r.app.got(other.EventID) == 1
	})
	if status, _ := statusOf(t, r.bundle, timedOut.EventID); status != string(queue.StatusDead) || r.app.got(timedOut.EventID) != 0 {
		t.Errorf("%s, never retried, is %q and reached the app %d times", timedOut.EventID, status, r.app.got(timedOut.EventID))
	}
	for action, n := range map[string]int64{"retry": 2, "delivery_pause": 1, "delivery_resume": 1} {
		if got := queuetest.Count(t, r.bundle.pool, `SELECT count(*) FROM audit_log
			WHERE action = $1 AND user_email = 'ops@example.com' AND token_name = 'operator token' AND token_id IS NOT NULL`, action); got != n {
			t.Errorf("%d %s audit entries naming the token, want %d", got, action, n)
		}
	}
}

func eventIDs(l apiclient.EventList) []string {
	var ids []string
	for _, e := range l.Events {
		ids = append(ids, e.Id)
	}
	slices.Sort(ids)
	return ids
}

func sorted(ids ...string) []string {
	slices.Sort(ids)
	return ids
}

// The exit codes say what happened: 1 when hookd refused (a read token
// retrying: 403, its problem's detail on stderr, the event unchanged), 2
// for bad usage (a flag the command does not have, no HOOKD_API_URL), 3
// when hookd cannot be reached.
func TestCLI_ExitCodesSayWhatHappened(t *testing.T) {
	t.Parallel()
	r := newCLIRig(t)
	read := r.account("viewer@example.com", "viewer", "read")
	dead := queuetest.InsertEvent(t, r.bundle.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 12})

	out, errOut, code := r.run(r.apiEnv(read), "", "events", "retry", dead.EventID)
	if code != cli.ExitRefused || out != "" || !strings.Contains(errOut, "403 Forbidden: Token viewer token has the read scope") {
		t.Errorf("a read token's retry: exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	if status, _ := statusOf(t, r.bundle, dead.EventID); status != string(queue.StatusDead) {
		t.Errorf("after a refused retry the event is %q", status)
	}
	if _, errOut, code := r.run(r.apiEnv(read), "", "events", "list", "--json"); code != cli.ExitDone {
		t.Errorf("a read token's list: exit %d\n%s", code, errOut)
	}

	_, errOut, code = r.run(r.apiEnv(read), "", "events", "list", "--bogus")
	if code != cli.ExitUsage || !strings.Contains(errOut, "flag provided but not defined: -bogus") {
		t.Errorf("a bad flag: exit %d, stderr:\n%s", code, errOut)
	}
	_, errOut, code = r.run([]string{"HOOKD_API_TOKEN=" + read}, "", "events", "list")
	if code != cli.ExitUsage || !strings.Contains(errOut, "set HOOKD_API_URL") {
		t.Errorf("no HOOKD_API_URL: exit %d, stderr:\n%s", code, errOut)
	}

	nowhere := "http://" + freeAddr(t)
	_, errOut, code = r.run([]string{"HOOKD_API_URL=" + nowhere, "HOOKD_API_TOKEN=" + read}, "", "events", "list")
	if code != cli.ExitUnreachable || !strings.Contains(errOut, "cannot reach hookd at "+nowhere+"/api/v1") {
		t.Errorf("an unreachable hookd: exit %d, stderr:\n%s", code, errOut)
	}
}

// A failure group retried from the command line, by the id failures list
// shows: its dry run counts, its retry sends each event once, audited.
func TestCLI_FailureGroupRetriedByItsID(t *testing.T) {
	t.Parallel()
	r := newCLIRig(t)
	operate := r.account("ops@example.com", "operator", "operate")
	var group []string
	for i := range 3 {
		e := queuetest.InsertEvent(t, r.bundle.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 12,
			LastError: fmt.Sprintf("dial tcp 10.0.0.%d:443: connection refused", i+1)})
		group = append(group, e.EventID)
	}
	apart := queuetest.InsertEvent(t, r.bundle.pool, queuetest.EventOpts{Status: queue.StatusDead, Attempts: 12,
		LastError: "the app answered 500"})

	var list apiclient.FailureGroupList
	r.apiJSON(&list, operate, "failures", "list")
	if list.Total != 2 || len(list.Groups) != 2 || list.Groups[0].Dead != 3 || list.Groups[1].Dead != 1 {
		t.Fatalf("failures list --json = %+v", list)
	}
	id := list.Groups[0].Id
	table, _ := r.api(operate, "failures", "list")
	if !strings.Contains(table, id+"  3       3     0") {
		t.Errorf("failures list printed\n%s", table)
	}

	var dry apiclient.GroupRetry
	r.apiJSON(&dry, operate, "failures", "retry", id, "--dry-run")
	if !dry.DryRun || dry.Count != 3 || dry.Dead == nil || *dry.Dead != 3 {
		t.Fatalf("failures retry --dry-run --json = %+v", dry)
	}
	out, _ := r.api(operate, "failures", "retry", id)
	if !strings.HasPrefix(out, "retried 3 events of ") {
		t.Errorf("failures retry printed %q", out)
	}
	queuetest.WaitFor(t, time.Minute, "the group's events to reach the app", func() bool {
		for _, e := range group {
			if r.app.got(e) != 1 {
				return false
			}
		}
		return true
	})
	if status, _ := statusOf(t, r.bundle, apart.EventID); status != string(queue.StatusDead) {
		t.Errorf("the event of another group is %q", status)
	}
	if n := queuetest.Count(t, r.bundle.pool, `SELECT count(*) FROM audit_log WHERE action = 'retry_group'
		AND token_name = 'operator token' AND count = 3`); n != 1 {
		t.Errorf("%d retry_group audit entries naming the token with count 3, want 1", n)
	}
}

// A replay created from the command line runs on the server; the command
// follows its progress until it is done and prints it as it ended.
func TestCLI_ReplayCreateFollowsItToTheEnd(t *testing.T) {
	t.Parallel()
	r := newCLIRig(t)
	operate := r.account("ops@example.com", "operator", "operate")
	events := make([]queuetest.LoggedOpts, 5)
	queuetest.InsertLogged(t, r.bundle.pool, events)
	to := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)

	var preview apiclient.ReplayPreview
	r.apiJSON(&preview, operate, "replay", "create", "--from", "1h", "--to", to, "--dry-run")
	if preview.Matching != 5 || preview.Replayable != 5 || len(preview.Sample) != 5 {
		t.Fatalf("replay create --dry-run --json = %+v", preview)
	}
	var end apiclient.Replay
	r.apiJSON(&end, operate, "replay", "create", "--name", "app fix 7", "--from", "1h", "--to", to)
	if end.State != apiclient.Done || end.Total != 5 || end.Delivered != 5 || r.app.replays("app fix 7") != 5 {
		t.Fatalf("replay create --json ended %+v; the app got %d replayed events", end, r.app.replays("app fix 7"))
	}
	if end.CreatedBy != "ops@example.com (API token operator token)" || end.ProgressUrl != fmt.Sprintf("/api/v1/replays/%d", end.Id) {
		t.Errorf("replay: created by %q, progress at %q", end.CreatedBy, end.ProgressUrl)
	}
}

// tokens list and revoke go through the API when HOOKD_API_URL is set:
// an admin token lists every token and revokes one, which is refused from
// then on; an operate token may not list them.
func TestCLI_TokensThroughTheAPI(t *testing.T) {
	t.Parallel()
	r := newCLIRig(t)
	admin := r.account("admin@example.com", "admin", "admin")
	operate := r.account("ops@example.com", "operator", "operate")

	out, _ := r.api(admin, "tokens", "list", "--json")
	var ts []apiclient.Token
	if err := json.Unmarshal([]byte(out), &ts); err != nil || len(ts) != 2 {
		t.Fatalf("tokens list --json: %v\n%s", err, out)
	}
	if _, errOut, code := r.run(r.apiEnv(operate), "", "tokens", "list"); code != cli.ExitRefused || !strings.Contains(errOut, "403") {
		t.Errorf("an operate token's tokens list: exit %d\n%s", code, errOut)
	}
	opsID := ts[slices.IndexFunc(ts, func(tk apiclient.Token) bool { return tk.Scope == apiclient.Operate })].Id
	out, _ = r.api(admin, "tokens", "revoke", fmt.Sprint(opsID))
	if !strings.HasPrefix(out, fmt.Sprintf("revoked token %d (operator token) of ops@example.com", opsID)) {
		t.Errorf("tokens revoke printed %q", out)
	}
	if _, errOut, code := r.run(r.apiEnv(operate), "", "events", "list"); code != cli.ExitRefused || !strings.Contains(errOut, "401") {
		t.Errorf("a revoked token: exit %d\n%s", code, errOut)
	}
	if n := queuetest.Count(t, r.bundle.pool, `SELECT count(*) FROM audit_log WHERE action = 'token_revoke'
		AND token_name = 'admin token' AND user_email = 'admin@example.com'`); n != 1 {
		t.Errorf("%d token_revoke entries naming the admin's token, want 1", n)
	}
}
