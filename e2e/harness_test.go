package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mxschmitt/playwright-go"

	"github.com/hookd/hookd/e2e/e2etest"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue/queuetest"
)

const (
	adminEmail    = "support@hookd.test"
	adminPassword = "e2e-correct-horse-battery-staple"
	// webhookSecret is what hookd verifies signatures with; the tests sign
	// with it through stripe-go, as Stripe itself would.
	webhookSecret = "whsec_e2eSigningSecretForTheTestsOnly"
	// downstreamRefusal is the body the downstream answers with while it
	// fails, so the tests can find it again in last_error.
	downstreamRefusal = "downstream refuses deliveries during this test"
)

// expect retries each assertion for up to 10 s: hookd's pages refresh every
// 2 s and the retry loop polls every 200 ms, and two cores are shared by
// parallel tests, so the default 5 s leaves too little slack.
var expect = playwright.NewPlaywrightAssertions(10_000)

// hookd is one running hookd process with its own database and downstream.
type hookd struct {
	baseURL    string
	db         *pgxpool.Pool
	downstream *downstream
	log        *e2etest.SyncBuffer
	pid        int
}

// startHookd starts the binary on a fresh database and a free port, and waits
// until /readyz answers. The process is stopped, and must exit cleanly, when
// t ends. env, as NAME=value, adds settings or overrides the tests' own.
func startHookd(t *testing.T, env ...string) *hookd {
	t.Helper()
	return startHookdOn(t, func() int { return freePort(t) }, env...)
}

// startHookdOn is startHookd on the port port gives, for a test that must
// know hookd's address before it starts (an identity provider's redirect
// URL).
func startHookdOn(t *testing.T, port func() int, env ...string) *hookd {
	t.Helper()
	dbURL := queuetest.NewDatabaseURL(t)
	h := &hookd{downstream: newDownstream(t), log: &e2etest.SyncBuffer{}}

	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	t.Cleanup(pool.Close)
	h.db = pool

	// A port picked by listening on :0 can be taken by someone else before
	// hookd binds it; hookd then exits at once, and another port is tried.
	for try := 1; ; try++ {
		err := h.start(t, dbURL, port(), env)
		if err == nil {
			return h
		}
		if !errors.Is(err, errPortTaken) || try == 3 {
			t.Fatalf("start hookd: %v\nhookd's log:\n%s", err, h.log)
		}
		h.log.Reset()
	}
}

var (
	errPortTaken = errors.New("listen address already in use")
	errExited    = errors.New("hookd exited before it was ready")
)

func (h *hookd) start(t *testing.T, dbURL string, port int, env []string) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command(hookdBin, "serve")
	cmd.Env = append(environWithout("DATABASE_URL", "HOOKD_", "STRIPE_"),
		"DATABASE_URL="+dbURL,
		"HOOKD_ADDR="+addr,
		"STRIPE_WEBHOOK_SECRET="+webhookSecret,
		"HOOKD_FORWARD_URL="+h.downstream.srv.URL,
		"HOOKD_FORWARD_TIMEOUT=5s",
		"HOOKD_RETRY_INTERVAL=200ms",
		"HOOKD_ADMIN_EMAIL="+adminEmail,
		"HOOKD_ADMIN_PASSWORD="+adminPassword,
		// Ten years: the pruner must never remove the markers a test ages.
		"HOOKD_MARKER_RETENTION=87600h",
		"HOOKD_SHUTDOWN_TIMEOUT=10s",
		// The default metrics address is one port for every hookd running
		// at once.
		"HOOKD_METRICS_ADDR=127.0.0.1:0",
	)
	// exec keeps the last of duplicate names, so these override the above.
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = h.log, h.log
	cmd.SysProcAttr = hookdProcAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	h.pid = cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	h.baseURL = "http://" + addr
	if err := waitReady(h.baseURL, exited); err != nil {
		if !errors.Is(err, errExited) {
			_ = cmd.Process.Kill()
			<-exited
		}
		if strings.Contains(h.log.String(), "address already in use") {
			return fmt.Errorf("%w: %s", errPortTaken, addr)
		}
		return err
	}

	t.Cleanup(func() {
		select {
		case err := <-exited:
			// Its log says whether it stopped on a signal ("shutting
			// down") or on an error; either way the test lost its server.
			t.Errorf("hookd stopped during the test, before the test stopped it (exit: %v); see its log", exitStatus(err))
		default:
			// SIGTERM is how systemd stops hookd; the spec wants a clean exit.
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Errorf("stop hookd: %v", err)
			}
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("hookd exited with %v after SIGTERM; want a clean exit", err)
				}
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
				t.Errorf("hookd still running 20 s after SIGTERM; killed it")
			}
		}
		if t.Failed() {
			saveFile(t, "hookd.log", h.log.Bytes())
		}
	})
	return nil
}

func exitStatus(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}

// waitReady polls /readyz until it answers 200, the process exits, or 30 s
// pass (a cold start on a loaded machine applies migrations and hashes the
// admin password).
func waitReady(baseURL string, exited <-chan error) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("%w: %v", errExited, err)
		case <-deadline:
			return errors.New("hookd not ready at /readyz after 30 s")
		case <-tick.C:
		}
		resp, err := client.Get(baseURL + "/readyz")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// environWithout is this process's environment minus the variables whose
// names start with one of prefixes, so a developer's own hookd settings
// never leak into the process under test.
func environWithout(prefixes ...string) []string {
	var env []string
next:
	for _, kv := range os.Environ() {
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		env = append(env, kv)
	}
	return env
}

// url returns the absolute URL of path on this hookd.
func (h *hookd) url(path string) string { return h.baseURL + path }

// sendEvent posts a Stripe event of type typ, signed like Stripe signs it,
// and fails t unless hookd answers 200. object is the JSON of the event's
// data.object. It returns the event id and the exact bytes sent.
func (h *hookd) sendEvent(t *testing.T, typ, object string) (string, []byte) {
	t.Helper()
	id, payload, status, body, err := h.postEvent(typ, object)
	if err != nil {
		t.Fatalf("post %s to /webhooks/stripe: %v", id, err)
	}
	if status != http.StatusOK {
		t.Fatalf("post %s to /webhooks/stripe: got %d %q, want 200", id, status, body)
	}
	return id, payload
}

// postEvent posts a fresh signed event like sendEvent and returns hookd's
// answer, for callers that must not stop the test from another goroutine.
func (h *hookd) postEvent(typ, object string) (id string, payload []byte, status int, body []byte, err error) {
	id = "evt_e2e" + randomHex(8)
	payload = stripeevent.Event{ID: id, Type: typ, Created: time.Now(), Object: []byte(object)}.JSON()

	req, err := http.NewRequest(http.MethodPost, h.url("/webhooks/stripe"), bytes.NewReader(payload))
	if err != nil {
		return id, payload, 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Stripe-Signature", stripeevent.Sign(payload, webhookSecret, time.Now()))
	client := &http.Client{Timeout: 15 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return id, payload, 0, nil, err
	}
	defer resp.Body.Close()
	body, _ = io.ReadAll(resp.Body)
	return id, payload, resp.StatusCode, body, nil
}

// sendEvents posts n events of type typ with a minimal invoice object.
func (h *hookd) sendEvents(t *testing.T, n int, typ string) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i], _ = h.sendEvent(t, typ, `{"id":"in_e2e`+randomHex(6)+`","object":"invoice","amount_due":1999,"currency":"eur"}`)
	}
	return ids
}

// exec runs SQL against hookd's database.
func (h *hookd) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := h.db.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// count runs a query returning one integer.
func (h *hookd) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	return int(queuetest.Count(t, h.db, sql, args...))
}

// queueID returns the uuid of the queue row of a Stripe event id.
func (h *hookd) queueID(t *testing.T, eventID string) string {
	t.Helper()
	var id string
	err := h.db.QueryRow(context.Background(),
		`SELECT id::text FROM webhook_events WHERE source = 'stripe' AND event_id = $1`, eventID).Scan(&id)
	if err != nil {
		t.Fatalf("find the queue row of %s: %v", eventID, err)
	}
	return id
}

// downstream stands for the user's own app: it records every delivery and
// fails them all while told to.
type downstream struct {
	srv     *httptest.Server
	failing atomic.Bool

	mu        sync.Mutex
	delivered map[string][]byte   // event id -> body of its successful delivery
	refused   map[string]int      // event id -> deliveries answered 500
	replayed  map[string][]string // event id -> the Hookd-Replay of each replay's delivery
}

func newDownstream(t *testing.T) *downstream {
	d := &downstream{delivered: map[string][]byte{}, refused: map[string]int{}, replayed: map[string][]string{}}
	d.srv = httptest.NewServer(http.HandlerFunc(d.serveHTTP))
	t.Cleanup(d.srv.Close)
	return d
}

func (d *downstream) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id := r.Header.Get("Hookd-Event-Id")
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failing.Load() {
		d.refused[id]++
		http.Error(w, downstreamRefusal, http.StatusInternalServerError)
		return
	}
	d.delivered[id] = body
	if name := r.Header.Get("Hookd-Replay"); name != "" {
		d.replayed[id] = append(d.replayed[id], name)
	}
	w.WriteHeader(http.StatusOK)
}

// replays returns the Hookd-Replay of each replay's delivery of id.
func (d *downstream) replays(id string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.replayed[id])
}

// setFailing makes every delivery from now on fail (true) or succeed.
func (d *downstream) setFailing(v bool) { d.failing.Store(v) }

// deliveredBody returns the body of id's successful delivery, if any.
func (d *downstream) deliveredBody(id string) ([]byte, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.delivered[id]
	return b, ok
}

// seen reports whether id reached the downstream at all.
func (d *downstream) seen(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.delivered[id]
	return ok || d.refused[id] > 0
}

// newPage opens a page in a browser context of its own, so tests share no
// cookies. When t fails, a screenshot and the page's HTML are saved under
// test-output/<test name>/.
func (h *hookd) newPage(t *testing.T, opts ...playwright.BrowserNewContextOptions) playwright.Page {
	t.Helper()
	o := playwright.BrowserNewContextOptions{}
	if len(opts) > 0 {
		o = opts[0]
	}
	o.BaseURL = playwright.String(h.baseURL)
	bctx, err := browser.NewContext(o)
	if err != nil {
		t.Fatalf("new browser context: %v", err)
	}
	// Actions (click, fill, goto) give up after 15 s instead of Playwright's
	// 30 s, so a broken page fails the run sooner.
	bctx.SetDefaultTimeout(15_000)
	page, err := bctx.NewPage()
	if err != nil {
		t.Fatalf("new page: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if png, err := page.Screenshot(playwright.PageScreenshotOptions{FullPage: playwright.Bool(true)}); err == nil {
				saveFile(t, "screenshot.png", png)
			} else {
				t.Logf("screenshot: %v", err)
			}
			if html, err := page.Content(); err == nil {
				saveFile(t, "page.html", []byte(html))
			} else {
				t.Logf("page HTML: %v", err)
			}
		}
		if err := bctx.Close(); err != nil {
			t.Logf("close browser context: %v", err)
		}
	})
	return page
}

// signIn signs in as the bootstrapped admin and waits for the overview.
func (h *hookd) signIn(t *testing.T, page playwright.Page) {
	t.Helper()
	visit(t, page, "/login")
	must(t, page.GetByLabel("Email").Fill(adminEmail), "fill Email")
	must(t, page.GetByLabel("Password").Fill(adminPassword), "fill Password")
	click(t, page.GetByRole("button", playwright.PageGetByRoleOptions{Name: "Sign in"}), "Sign in")
	must(t, expect.Page(page).ToHaveURL(h.url("/")), "signed in, on the overview")
}

// loginURL matches the login page, with or without a query string.
var loginURL = regexp.MustCompile(`/login(\?.*)?$`)

func visit(t *testing.T, page playwright.Page, path string) {
	t.Helper()
	if _, err := page.Goto(path); err != nil {
		t.Fatalf("go to %s: %v", path, err)
	}
}

func click(t *testing.T, l playwright.Locator, what string) {
	t.Helper()
	must(t, l.Click(), "click "+what)
}

// rowButton finds the button inside row whose visible text is exactly label,
// so "Retry" never matches "Retry now". Row buttons are named after their
// event for screen readers ("Retry evt_…"), so the accessible name is no
// handle here.
func rowButton(row playwright.Locator, label string) playwright.Locator {
	return row.GetByRole("button").Filter(playwright.LocatorFilterOptions{
		HasText: regexp.MustCompile(`^\s*` + regexp.QuoteMeta(label) + `\s*$`),
	})
}

// pageButton finds a button on the page by its exact accessible name.
func pageButton(page playwright.Page, name string) playwright.Locator {
	return page.GetByRole("button", playwright.PageGetByRoleOptions{Name: name, Exact: playwright.Bool(true)})
}

// eventRow is the row of a Stripe event in an event list.
func eventRow(page playwright.Page, eventID string) playwright.Locator {
	return page.Locator(fmt.Sprintf(`tr[data-testid="event-row"][data-event-id="%s"]`, eventID))
}

// step runs one stage of a scenario as a subtest. Each stage builds on the
// page the previous one left, so the scenario stops at the first that fails.
func step(t *testing.T, name string, fn func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, fn) {
		t.FailNow()
	}
}

func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// saveFile writes one artifact of a failed test under test-output/.
func saveFile(t *testing.T, name string, data []byte) {
	dir := filepath.Join(outputDir, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("save %s: %v", name, err)
		return
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Logf("save %s: %v", name, err)
		return
	}
	t.Logf("saved %s", path)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// waitFor polls cond until it holds, failing the test after 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("not within 30 s: %s", what)
		case <-tick.C:
		}
	}
}
