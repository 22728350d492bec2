package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
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
	for _, args := range [][]string{
		{"-endpoint", "connect", "-thin", "-type", "invoice.paid"},
		{"-endpoint", "connect", "-account", "acct_1Connected", "-type", "charge.succeeded"},
		{"-endpoint", "connect", "-thin", "-account", "acct_1Connected"},
		{"-endpoint", "connect", "-ping"},
		{"-endpoint", "connect", "-generation-failure"},
	} {
		if out, err := send(args...); err != nil || !strings.Contains(out, "200 OK") {
			t.Errorf("send-test-event %q: %v\n%s\n%s", args, err, out, stderr)
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
