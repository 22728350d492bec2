package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/demoapp"
	"github.com/hookd/hookd/queue/queuetest"
)

// send-test-event sends what Stripe sends today: thin events, Connect
// events, pings, and the notice of an event Stripe could not generate,
// each signed with the secret of the endpoint asked for. hookd serve
// answers each 200, and keeps the notice from the app.
func TestSendTestEvent_ThinConnectPingAndNotice(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []map[string]any
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e map[string]any
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &e); err != nil {
			t.Errorf("the app got %q: %v", body, err)
		}
		mu.Lock()
		got = append(got, e)
		mu.Unlock()
	}))
	t.Cleanup(app.Close)
	base, stop, stderr := startServe(t, map[string]string{
		"STRIPE_WEBHOOK_SECRET": testSecret,
		"HOOKD_FORWARD_URL":     app.URL,
	})
	t.Cleanup(func() { _ = stop() })
	// The receiver's secret is the connect endpoint's; another endpoint's
	// would be refused.
	env := map[string]string{"STRIPE_WEBHOOK_SECRETS": "account=whsec_other;connect=" + testSecret}
	send := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(t.Context(), append([]string{"send-test-event", "-url", base + "/webhooks/stripe"}, args...),
			func(k string) string { return env[k] }, strings.NewReader(""), &out, io.Discard)
		return out.String(), err
	}
	// Each says the type the app receives: a thin event's is v1.<type>.
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"-endpoint", "connect", "-thin", "-type", "invoice.paid"}, "(v1.invoice.paid)"},
		{[]string{"-endpoint", "connect", "-account", "acct_1Connected", "-type", "charge.succeeded"}, "(charge.succeeded)"},
		{[]string{"-endpoint", "connect", "-thin", "-account", "acct_1Connected"}, "(v1.invoice.paid)"},
		{[]string{"-endpoint", "connect", "-ping"}, "(v2.core.event_destination.ping)"},
		{[]string{"-endpoint", "connect", "-generation-failure"}, "(v2.core.health.event_generation_failure.resolved)"},
	} {
		if out, err := send(c.args...); err != nil || !strings.Contains(out, "200 OK") || !strings.Contains(out, c.says) {
			t.Errorf("send-test-event %q: %v, want 200 OK and %s\n%s\n%s", c.args, err, c.says, out, stderr)
		}
	}
	if out, err := send("-endpoint", "account"); err == nil || !strings.Contains(out, "400") {
		t.Errorf("an event signed with another endpoint's secret: %v %q, want it refused", err, out)
	}
	if _, err := send("-endpoint", "nowhere"); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("an endpoint not in STRIPE_WEBHOOK_SECRETS: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	types := map[string]map[string]any{}
	thinContexts := map[any]int{}
	for _, e := range got {
		types[e["type"].(string)] = e
		if e["object"] == "v2.core.event" && strings.HasPrefix(e["type"].(string), "v1.") {
			thinContexts[e["context"]]++
			if e["data"] != nil || e["related_object"] == nil {
				t.Errorf("thin event as the app got it: %v", e)
			}
		}
	}
	if thinContexts[nil] != 1 || thinContexts["acct_1Connected"] != 1 {
		t.Errorf("thin events by context: %v, want one of the account's own and one of acct_1Connected", thinContexts)
	}
	if e := types["charge.succeeded"]; e == nil || e["account"] != "acct_1Connected" {
		t.Errorf("Connect event as the app got it: %v", e)
	}
	if e := types["v2.core.health.event_generation_failure.resolved"]; e != nil {
		t.Errorf("the app got Stripe's generation-failure notice: %v", e)
	}
}

// send-test-event -outage takes the demo app down: only when the request
// is signed with the forward secret, for as long as it says, and the
// events it then sends find the app down.
func TestSendTestEvent_OutageTakesTheDemoAppDown(t *testing.T) {
	t.Parallel()
	const forwardSecret = "whsec_ZTJlLWRlbW8tZm9yd2FyZC1rZXk="
	addr := freeAddr(t)
	env := map[string]string{"HOOKD_FORWARD_URL": "http://" + addr + "/stripe-events", "HOOKD_FORWARD_SECRET": forwardSecret,
		"STRIPE_WEBHOOK_SECRET": testSecret}
	getenv := func(k string) string { return env[k] }
	ctx, cancel := context.WithCancel(t.Context())
	appDone := make(chan error, 1)
	go func() {
		appDone <- run(ctx, []string{"demo-app"}, getenv, strings.NewReader(""), io.Discard, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-appDone; err != nil {
			t.Errorf("demo app: %v", err)
		}
	})
	status := func() int {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	queuetest.WaitFor(t, 10*time.Second, "the demo app to answer", func() bool { return status() == http.StatusOK })

	resp, err := http.Post("http://"+addr+demoapp.OutagePath, "text/plain", strings.NewReader("1h"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || status() != http.StatusOK {
		t.Fatalf("an unsigned outage request: %d, then the app answered %d; want 401 and still up", resp.StatusCode, status())
	}

	var deliveries []string
	var mu sync.Mutex
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		deliveries = append(deliveries, r.Header.Get("Stripe-Signature"))
		mu.Unlock()
	}))
	t.Cleanup(receiver.Close)
	send := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(t.Context(), append([]string{"send-test-event", "-url", receiver.URL}, args...), getenv,
			strings.NewReader(""), &out, io.Discard)
		return out.String(), err
	}
	out, err := send("-outage", "1h", "-n", "3")
	if err != nil || !strings.Contains(out, "demo app down for 1h0m0s") {
		t.Fatalf("send-test-event -outage 1h: %v\n%s", err, out)
	}
	mu.Lock()
	sent := len(deliveries)
	mu.Unlock()
	if got := status(); got != http.StatusServiceUnavailable || sent != 3 {
		t.Errorf("after -outage 1h the app answered %d and %d events were sent; want 503 and 3", got, sent)
	}
	// A new outage replaces the one running: a second, and the app is back.
	if out, err := send("-outage", "1s"); err != nil || !strings.Contains(out, "demo app down for 1s") {
		t.Fatalf("send-test-event -outage 1s: %v\n%s", err, out)
	}
	queuetest.WaitFor(t, 30*time.Second, "the demo app back after its outage", func() bool { return status() == http.StatusOK })
	if _, err := send("-outage", "48h"); err == nil || !strings.Contains(err.Error(), "between 1s and 24h") {
		t.Errorf("-outage 48h: %v, want it refused", err)
	}
}

// -type takes a thin event's type as the app receives it (v1.<type>) as
// well as the snapshot type it mirrors: either way the thin event is of
// type v1.<type>, about the object of <type>. Without -thin, a v1.* type
// is refused, saying why.
func TestSendTestEvent_ThinTypeTakesV1Prefix(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{"customer.created", "v1.customer.created"} {
		payload, _, sent, err := testEventPayload(testEventKind{thin: true}, typ)
		if err != nil {
			t.Fatalf("-thin -type %s: %v", typ, err)
		}
		var e struct {
			Type    string `json:"type"`
			Related struct {
				Type string `json:"type"`
			} `json:"related_object"`
		}
		if err := json.Unmarshal(payload, &e); err != nil {
			t.Fatal(err)
		}
		if sent != "v1.customer.created" || e.Type != "v1.customer.created" || e.Related.Type != "customer" {
			t.Errorf("-thin -type %s: says %s, sends type %s about a %q; want v1.customer.created about a customer",
				typ, sent, e.Type, e.Related.Type)
		}
	}
	if _, _, _, err := testEventPayload(testEventKind{}, "v1.customer.created"); err == nil ||
		!strings.Contains(err.Error(), "add -thin") {
		t.Errorf("-type v1.customer.created without -thin: %v, want a refusal naming -thin", err)
	}
}
