package e2e

import (
	"bufio"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/hookd/hookd/e2e/e2etest"
	"github.com/hookd/hookd/queue/queuetest"
)

// demoEnvFile holds the settings `make run` gives hookd and the demo app.
const demoEnvFile = "../.ci/demo.env"

// The README's first five minutes, as `make run` prints them, started by
// the test instead of make: hookd and the demo app with make run's demo
// settings, then `hookd send-test-event -n 50`. The dashboard shows
// processed events, queued ones with their errors, retries, and events gone
// dead, one of which a person retries and sees processed. No page logs an
// error to the browser console on the way.
func TestDemo_TheWholeStoryFromMakeRun(t *testing.T) {
	t.Parallel()
	env := demoEnv(t)
	app := startDemoApp(t, env)
	env = append(env, "HOOKD_FORWARD_URL="+app+"/stripe-events")
	h := startHookd(t, env...)
	page := h.newPage(t)
	console := watchConsole(page)

	step(t, "SignInShowsTheDemoBackoff", func(t *testing.T) {
		h.signIn(t, page)
		must(t, expect.Locator(page.GetByTestId("demo-banner")).ToContainText("Demo backoff: seconds, not hours"),
			"the demo backoff is announced")
	})

	step(t, "SendFiftyEvents", func(t *testing.T) {
		cmd := exec.Command(hookdBin, "send-test-event", "-n", "50", "-url", h.url("/webhooks/stripe"))
		cmd.Env = append(environWithout("DATABASE_URL", "HOOKD_", "STRIPE_"), "STRIPE_WEBHOOK_SECRET="+webhookSecret)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("send-test-event -n 50: %v\n%s", err, out)
		}
		summary := regexp.MustCompile(`sent 50 events: (\d+) processed, (\d+) queued\n`).FindSubmatch(out)
		if summary == nil {
			t.Fatalf("send-test-event -n 50 printed no summary of processed and queued events:\n%s", out)
		}
		t.Logf("%s", summary[0])
	})

	// The five subscription updates of the mix are rejected with a 422 on
	// every attempt; they are the ones that go dead.
	subscriptions := func() []string {
		rows, err := h.db.Query(t.Context(), `SELECT event_id FROM webhook_events
			WHERE event_type = 'customer.subscription.updated' ORDER BY event_id`)
		must(t, err, "list the subscription updates")
		defer rows.Close()
		var ids []string
		for rows.Next() {
			var id string
			must(t, rows.Scan(&id), "scan")
			ids = append(ids, id)
		}
		return ids
	}

	step(t, "OverviewShowsProcessedAndQueued", func(t *testing.T) {
		visit(t, page, "/")
		must(t, expect.Locator(page.GetByTestId("marker-count")).Not().ToHaveText("0"), "processed events are counted")
		if ids := subscriptions(); len(ids) != 5 {
			t.Fatalf("%d subscription updates on the queue, want the mix's 5", len(ids))
		}
	})

	step(t, "PendingShowsErrorsAndRetries", func(t *testing.T) {
		visit(t, page, "/events?status=pending&type=customer.subscription.updated")
		rows := page.Locator(`tr[data-testid="event-row"]`)
		must(t, expect.Locator(rows.First()).ToContainText("downstream answered 422"), "a pending event shows its error")
		// Retries happen within seconds: the retry count climbs while the
		// person watches.
		queuetest.WaitFor(t, 20*time.Second, "a subscription update retried twice", func() bool {
			return h.count(t, `SELECT count(*) FROM webhook_events
				WHERE event_type = 'customer.subscription.updated' AND attempts >= 2`) > 0
		})
		_, err := page.Reload()
		must(t, err, "reload Pending")
		must(t, expect.Locator(rows.Filter(playwright.LocatorFilterOptions{
			Has: page.Locator(`td[data-label="Retries"]`).GetByText(regexp.MustCompile(`^[2-4]$`)),
		}).First()).ToBeVisible(), "an event retried at least twice")
		// The app's crashes wait beside them, with the framework's error.
		visit(t, page, "/events?status=pending&error=ECONNREFUSED")
		must(t, expect.Locator(rows.First()).ToContainText(`downstream answered 500: {"statusCode":500,"code":"ECONNREFUSED"`),
			"a crashed delivery waits on Pending with its error")
	})

	var dead string
	step(t, "EventsGoDead", func(t *testing.T) {
		queuetest.WaitFor(t, 90*time.Second, "the five subscription updates dead", func() bool {
			return h.count(t, `SELECT count(*) FROM webhook_events WHERE status = 'dead'`) == 5
		})
		// The crashes went through on the same retry that killed the rest.
		queuetest.WaitFor(t, 30*time.Second, "nothing left pending", func() bool {
			return h.count(t, `SELECT count(*) FROM webhook_events WHERE status <> 'dead'`) == 0
		})
		visit(t, page, "/events?status=dead")
		rows := page.Locator(`tr[data-testid="event-row"]`)
		must(t, expect.Locator(rows).ToHaveCount(5), "five dead events")
		must(t, expect.Locator(rows.First()).ToContainText("downstream answered 422: {\"error\":{\"message\":\"Unknown price"),
			"a dead event shows the app's 422")
		dead = subscriptions()[0]
	})

	step(t, "RetryBringsOneBack", func(t *testing.T) {
		click(t, eventRow(page, dead).GetByRole("link", playwright.LocatorGetByRoleOptions{Name: dead}), "open "+dead)
		// The inline attempt and the five retries.
		must(t, expect.Locator(page.GetByTestId("attempt-row")).ToHaveCount(6), "six failed attempts")
		click(t, pageButton(page, "Retry"), "Retry")
		must(t, expect.Locator(page.GetByTestId("flash")).ToContainText(dead+" queued for retry"), "flash after Retry")
		queuetest.WaitFor(t, 20*time.Second, dead+" processed", func() bool {
			return h.count(t, `SELECT count(*) FROM processed_webhook_events WHERE event_id = $1`, dead) == 1
		})
		visit(t, page, "/search?q="+url.QueryEscape(dead))
		must(t, expect.Locator(page.GetByTestId("search-how")).ToContainText("which a person asked for"),
			"Find an event says a person's retry processed it")
		must(t, expect.Locator(page.GetByTestId("demo-banner")).ToBeVisible(), "the banner is on every page")
	})

	step(t, "NoConsoleErrorsOnAnyPage", func(t *testing.T) {
		// Every page but an error page: Chromium logs the 404 of a page
		// that is meant to be one.
		other := subscriptions()[0]
		for _, path := range []string{"/", "/events?status=dead", "/events?status=pending", "/events?status=failed",
			"/events?status=retrying", "/events/" + h.queueID(t, other), "/failures", "/search?q=" + other,
			"/audit", "/accounts"} {
			visit(t, page, path)
			must(t, page.WaitForLoadState(playwright.PageWaitForLoadStateOptions{State: playwright.LoadStateLoad}), "load "+path)
		}
		visit(t, page, "/")
		click(t, pageButton(page, "Sign out"), "Sign out")
		must(t, expect.Page(page).ToHaveURL(loginURL), "signed out, on the login page")
		if errs := console.errors(); len(errs) > 0 {
			t.Errorf("the browser console logged %d errors:\n%s", len(errs), strings.Join(errs, "\n"))
		}
	})
}

// The lists say what would land on them while they are empty, and no page
// of a fresh hookd logs a console error either.
func TestEmptyListsExplainThemselves(t *testing.T) {
	t.Parallel()
	h := startHookd(t)
	page := h.newPage(t)
	console := watchConsole(page)
	visit(t, page, "/login")
	h.signIn(t, page)
	for path, want := range map[string]string{
		"/events?status=dead":    "Events that fail every retry land here",
		"/events?status=pending": "waits here for its next retry",
	} {
		visit(t, page, path)
		must(t, expect.Locator(page.Locator(".empty")).ToContainText(want), path+" explains its empty state")
	}
	visit(t, page, "/")
	must(t, expect.Page(page).ToHaveTitle("Overview · hookd"), "the overview's title")
	must(t, expect.Locator(page.GetByTestId("demo-banner")).ToHaveCount(0), "no demo banner without the demo backoff")
	if errs := console.errors(); len(errs) > 0 {
		t.Errorf("the browser console logged %d errors:\n%s", len(errs), strings.Join(errs, "\n"))
	}
}

// consoleWatch collects what a page logs as an error and the exceptions it
// throws.
type consoleWatch struct {
	mu   sync.Mutex
	errs []string
}

func watchConsole(page playwright.Page) *consoleWatch {
	w := &consoleWatch{}
	page.OnConsole(func(m playwright.ConsoleMessage) {
		if m.Type() == "error" {
			w.add("console error on " + page.URL() + ": " + m.Text())
		}
	})
	page.OnPageError(func(err error) { w.add("page error on " + page.URL() + ": " + err.Error()) })
	return w
}

func (w *consoleWatch) add(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, s)
}

func (w *consoleWatch) errors() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.errs...)
}

// demoEnv reads make run's demo settings as NAME=value lines, leaving out
// HOOKD_FORWARD_URL, whose port the test picks.
func demoEnv(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(demoEnvFile)
	if err != nil {
		t.Fatalf("read make run's demo settings: %v", err)
	}
	defer f.Close()
	var env []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "HOOKD_FORWARD_URL=") {
			continue
		}
		if !strings.Contains(line, "=") {
			t.Fatalf("%s: %q is not NAME=value", demoEnvFile, line)
		}
		env = append(env, line)
	}
	must(t, sc.Err(), "read "+demoEnvFile)
	if len(env) == 0 {
		t.Fatalf("%s holds no settings", demoEnvFile)
	}
	// make run adds a forward secret to the developer's settings; the demo
	// app then checks every delivery's signature.
	return append(env, "HOOKD_FORWARD_SECRET=whsec_"+"ZTJlLWRlbW8tZm9yd2FyZC1rZXk=")
}

// startDemoApp runs `hookd demo-app` with env on a free port and returns
// its base URL once it answers. It is stopped when t ends, after hookd.
func startDemoApp(t *testing.T, env []string) string {
	t.Helper()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	log := &e2etest.SyncBuffer{}
	cmd := exec.Command(hookdBin, "demo-app")
	cmd.Env = append(append(environWithout("DATABASE_URL", "HOOKD_", "STRIPE_"), env...),
		"HOOKD_FORWARD_URL=http://"+addr+"/stripe-events")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = hookdProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the demo app: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("demo app exited with %v after SIGTERM; want a clean exit", err)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("demo app still running 10 s after SIGTERM; killed it")
		}
		if t.Failed() {
			saveFile(t, "demo-app.log", log.Bytes())
		}
	})
	base := "http://" + addr
	queuetest.WaitFor(t, 15*time.Second, "the demo app to answer", func() bool {
		select {
		case err := <-exited:
			t.Fatalf("the demo app exited: %v\n%s", err, log)
		default:
		}
		resp, err := http.Get(base + "/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return base
}
