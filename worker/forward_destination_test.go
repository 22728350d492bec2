package worker_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/forwardsig"
	"github.com/hookd/hookd/worker"
)

// call is one request an app received: its headers and body.
type call struct {
	header http.Header
	body   []byte
}

// recordingApp is an httptest app that answers 204 and keeps every call.
type recordingApp struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls []call
}

func newRecordingApp(t *testing.T) *recordingApp {
	t.Helper()
	a := &recordingApp{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.calls = append(a.calls, call{r.Header.Clone(), body})
		a.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *recordingApp) received() []call {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.calls)
}

// whsec is the Standard Webhooks secret of key.
func whsec(key string) string {
	return "whsec_" + base64.StdEncoding.EncodeToString([]byte(key))
}

// sigOf is the v1 signature of c under key, computed here by hand.
func sigOf(key string, c call) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(c.header.Get("webhook-id") + "." + c.header.Get("webhook-timestamp") + "."))
	mac.Write(c.body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Every call of a destination's Forwarder names the destination: the first
// attempt, a retry and a replay's delivery alike.
func TestForwarder_DestinationNamedOnEveryCall(t *testing.T) {
	t.Parallel()
	app := newRecordingApp(t)
	f, err := worker.NewDestinationForwarder(worker.ForwardOptions{Name: "billing", URL: app.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []worker.Delivery{
		{EventID: "evt_1", EventType: "invoice.paid", Payload: []byte(`{"id":"evt_1"}`)},
		{EventID: "evt_1", EventType: "invoice.paid", Payload: []byte(`{"id":"evt_1"}`), Attempt: 3},
		{EventID: "evt_2", EventType: "charge.refunded", Payload: []byte(`{"id":"evt_2"}`), Replay: "backfill"},
	} {
		if res := f.Process(t.Context(), d); res.Err != nil {
			t.Fatalf("%+v: %v", d, res.Err)
		}
	}
	calls := app.received()
	if len(calls) != 3 {
		t.Fatalf("app got %d calls, want 3", len(calls))
	}
	for i, c := range calls {
		if got := c.header.Values(worker.HeaderDestination); !slices.Equal(got, []string{"billing"}) {
			t.Errorf("call %d: %s = %q, want [billing]", i, worker.HeaderDestination, got)
		}
	}
}

// During a rotation each call is signed under the new secret and the
// previous one, the new one first: an app holding either alone verifies.
func TestForwarder_RotationSignsUnderBothSecrets(t *testing.T) {
	t.Parallel()
	app := newRecordingApp(t)
	const newKey, oldKey = "the new key of the crm", "the previous key of the crm"
	f, err := worker.NewDestinationForwarder(worker.ForwardOptions{
		Name: "crm", URL: app.srv.URL, Secrets: []string{whsec(newKey), whsec(oldKey)},
	})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"evt_1","object":"event","type":"customer.updated"}`)
	if res := f.Process(t.Context(), worker.Delivery{EventID: "evt_1", EventType: "customer.updated", Payload: body}); res.Err != nil {
		t.Fatal(res.Err)
	}
	calls := app.received()
	if len(calls) != 1 {
		t.Fatalf("app got %d calls, want 1", len(calls))
	}
	c := calls[0]
	if got, want := c.header.Get("webhook-signature"), sigOf(newKey, c)+" "+sigOf(oldKey, c); got != want {
		t.Errorf("webhook-signature: got %q, want %q (the new key's, then the previous one's)", got, want)
	}
	for _, key := range []string{newKey, oldKey} {
		parsed, err := forwardsig.ParseSecret(whsec(key))
		if err != nil {
			t.Fatal(err)
		}
		if !forwardsig.Verify(c.header, parsed, c.body, time.Now(), 5*time.Minute) {
			t.Errorf("an app holding only %q does not verify the call", key)
		}
	}
	if other, _ := forwardsig.ParseSecret(whsec("neither")); forwardsig.Verify(c.header, other, c.body, time.Now(), 5*time.Minute) {
		t.Error("an app holding neither key verifies the call")
	}
}

// A destination's own headers go out on every call, every value of each,
// whatever the case the caller wrote their names in; changing the caller's
// map afterwards changes nothing sent. User-Agent may be replaced.
func TestForwarder_DestinationHeadersSent(t *testing.T) {
	t.Parallel()
	app := newRecordingApp(t)
	headers := http.Header{
		"authorization": {"Bearer tok_123"},
		"X-Tenant":      {"eu-1", "eu-2"},
		"User-Agent":    {"billing-relay"},
	}
	f, err := worker.NewDestinationForwarder(worker.ForwardOptions{Name: "billing", URL: app.srv.URL, Headers: headers})
	if err != nil {
		t.Fatal(err)
	}
	headers["X-Tenant"][0] = "changed"
	headers.Set("X-Added-Later", "1")
	for i := range 2 {
		if res := f.Process(t.Context(), worker.Delivery{EventID: "evt_1", Payload: []byte(`{}`), Attempt: i}); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	calls := app.received()
	if len(calls) != 2 {
		t.Fatalf("app got %d calls, want 2", len(calls))
	}
	for i, c := range calls {
		for name, want := range map[string][]string{
			"Authorization": {"Bearer tok_123"}, "X-Tenant": {"eu-1", "eu-2"}, "User-Agent": {"billing-relay"},
			"X-Added-Later": nil, "Content-Type": {"application/json"}, "Hookd-Event-Id": {"evt_1"},
		} {
			if got := c.header.Values(name); !slices.Equal(got, want) {
				t.Errorf("call %d: %s = %q, want %q", i, name, got, want)
			}
		}
	}
}

// A header hookd sets itself, or that net/http writes from the request, is
// refused with an error naming it, whatever its case; so are a malformed
// header, a malformed or empty secret and a name that cannot be sent.
func TestForwarder_DestinationRefusesBadOptions(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"Content-Type", "content-type", "webhook-signature", "Webhook-Id", "webhook-timestamp",
		"Hookd-Destination", "hookd-event-id", "traceparent", "Tracestate", "Host", "Content-Length",
	} {
		_, err := worker.NewDestinationForwarder(worker.ForwardOptions{
			Name: "billing", URL: "http://app.invalid", Headers: http.Header{name: {"x"}},
		})
		if err == nil || !strings.Contains(err.Error(), http.CanonicalHeaderKey(name)) {
			t.Errorf("header %s: got error %v, want one naming %s", name, err, http.CanonicalHeaderKey(name))
		}
	}
	for what, o := range map[string]struct {
		opts worker.ForwardOptions
		want string
	}{
		"a name with a space":    {worker.ForwardOptions{Headers: http.Header{"X Tenant": {"a"}}}, `"X Tenant"`},
		"a value with a newline": {worker.ForwardOptions{Headers: http.Header{"X-Tenant": {"a\r\nX-Evil: 1"}}}, "X-Tenant"},
		"a header with no value": {worker.ForwardOptions{Headers: http.Header{"X-Tenant": {}}}, "X-Tenant"},
		"a bad previous secret":  {worker.ForwardOptions{Secrets: []string{whsec("new"), "whsec_%%%"}}, "secret 2 of 2"},
		"an empty new secret":    {worker.ForwardOptions{Secrets: []string{"", whsec("old")}}, "secret 1 of 2"},
		"an empty only secret":   {worker.ForwardOptions{Secrets: []string{""}}, "empty"},
		"a name with a newline":  {worker.ForwardOptions{Name: "crm\r\nX-Evil: 1"}, "destination name"},
	} {
		o.opts.URL = "http://app.invalid"
		if _, err := worker.NewDestinationForwarder(o.opts); err == nil || !strings.Contains(err.Error(), o.want) {
			t.Errorf("%s: got error %v, want one saying %q", what, err, o.want)
		}
	}
}

// NewForwarder, the one forwarder of HOOKD_FORWARD_URL, sends what it sent
// before destinations: no Hookd-Destination, exactly its headers, one
// signature under its secret.
func TestForwarder_WithoutDestinationSendsWhatItAlwaysDid(t *testing.T) {
	t.Parallel()
	app := newRecordingApp(t)
	const key = "forward-key-0123456789"
	f, err := worker.NewForwarder(app.srv.URL, whsec(key))
	if err != nil {
		t.Fatal(err)
	}
	live := true
	if res := f.Process(t.Context(), worker.Delivery{
		EventID: "evt_1", EventType: "invoice.paid", Payload: []byte(`{"id":"evt_1"}`), Attempt: 1,
		Endpoint: "connect", Livemode: &live, Account: "acct_1", Replay: "app bug fix",
	}); res.Err != nil {
		t.Fatal(res.Err)
	}
	calls := app.received()
	if len(calls) != 1 {
		t.Fatalf("app got %d calls, want 1", len(calls))
	}
	c := calls[0]
	got := slices.Sorted(maps.Keys(c.header))
	want := []string{"Accept-Encoding", "Content-Length", "Content-Type", "Hookd-Attempt", "Hookd-Endpoint",
		"Hookd-Event-Id", "Hookd-Event-Type", "Hookd-Livemode", "Hookd-Replay", "Hookd-Stripe-Account",
		"User-Agent", "Webhook-Id", "Webhook-Signature", "Webhook-Timestamp"}
	if !slices.Equal(got, want) {
		t.Errorf("headers: got %q, want %q", got, want)
	}
	if c.header.Get("User-Agent") != "hookd" {
		t.Errorf("User-Agent: got %q, want hookd", c.header.Get("User-Agent"))
	}
	if sig := c.header.Get("webhook-signature"); sig != sigOf(key, c) {
		t.Errorf("webhook-signature: got %q, want the one signature %q", sig, sigOf(key, c))
	}
}

// A destination's redirect says which URL to correct: the destination's,
// not HOOKD_FORWARD_URL.
func TestForwarder_DestinationRedirectNamesTheDestination(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/moved", http.StatusPermanentRedirect)
	}))
	t.Cleanup(srv.Close)
	f, err := worker.NewDestinationForwarder(worker.ForwardOptions{Name: "crm", URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	res := f.Process(t.Context(), worker.Delivery{EventID: "evt_1", Payload: []byte(`{}`)})
	if res.Err == nil || !strings.Contains(res.Err.Error(), "set the url of destination crm to the final URL") ||
		strings.Contains(res.Err.Error(), "HOOKD_FORWARD_URL") {
		t.Errorf("got %v, want a failure naming destination crm's url", res.Err)
	}
}
