package receiver_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
)

// Three labelled endpoints, as a deployment commonly has them: the
// account's snapshot endpoint, a Connect endpoint, a thin destination.
func threeEndpoints(t testing.TB) []endpoint.Endpoint {
	t.Helper()
	eps, err := endpoint.ParseSecrets("account=whsec_account,whsec_account_old;connect=whsec_connect;thin=whsec_thin")
	if err != nil {
		t.Fatal(err)
	}
	if err := endpoint.Configure(eps, "connect:connect=true;thin:kind=thin,stripe_id=ed_1"); err != nil {
		t.Fatal(err)
	}
	return eps
}

// appRequest is one request the app got.
type appRequest struct {
	body   string
	header http.Header
}

// app is the user's app over real HTTP: it keeps every request and
// answers status.
type app struct {
	mu       sync.Mutex
	requests []appRequest
	status   int
}

func newApp(t testing.TB) (*app, worker.Processor) {
	t.Helper()
	a := &app{status: http.StatusOK}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		a.mu.Lock()
		a.requests = append(a.requests, appRequest{body: string(body), header: req.Header.Clone()})
		status := a.status
		a.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	f, err := worker.NewForwarder(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	return a, f
}

func (a *app) got() []appRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]appRequest(nil), a.requests...)
}

func receive(t testing.TB, r *receiver.Receiver, body []byte, secret string) (receiver.Outcome, error) {
	t.Helper()
	return r.Receive(t.Context(), body, stripeevent.Sign(body, secret, time.Now()))
}

// A thin event (ISO-8601 created, no data) is accepted and reaches the app
// byte for byte, with its endpoint, mode and account as headers.
func TestReceive_ThinEventReachesTheAppByteForByte(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	a, proc := newApp(t)
	eps := threeEndpoints(t)
	eps[2].Connect = true
	r := receiver.New(store, discardLogger, receiver.Config{Endpoints: eps, Processor: proc})
	body := stripeevent.ThinEvent{ID: stripeevent.NewID("evt"), Type: "v1.invoice.paid", Created: time.Now(),
		Livemode: true, Context: "acct_1ConnectedAcct",
		Related: stripeevent.RelatedObject{ID: "in_1", Type: "invoice", URL: "/v1/invoices/in_1"}}.JSON()

	for i, want := range []receiver.Outcome{receiver.Processed, receiver.Duplicate} {
		if got, err := receive(t, r, body, "whsec_thin"); err != nil || got != want {
			t.Fatalf("delivery %d: got %v, %v; want %v", i, got, err, want)
		}
	}
	reqs := a.got()
	if len(reqs) != 1 {
		t.Fatalf("the app got %d requests, want 1", len(reqs))
	}
	if reqs[0].body != string(body) {
		t.Errorf("the app got\n%s\nwant, byte for byte,\n%s", reqs[0].body, body)
	}
	for name, want := range map[string]string{"Hookd-Endpoint": "thin", "Hookd-Livemode": "true",
		"Hookd-Stripe-Account": "acct_1ConnectedAcct"} {
		if got := reqs[0].header.Get(name); got != want {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
	if got := queuetest.Markers(t, bundle.pool); got != 1 {
		t.Errorf("markers: got %d, want 1", got)
	}
	at, ok, err := store.LastEventAt(t.Context(), "thin")
	if err != nil || !ok || time.Since(at) > time.Minute {
		t.Errorf("LastEventAt(thin) = %v, %v, %v; want about now", at, ok, err)
	}
	if accounts, err := store.AccountsSeen(t.Context(), "thin", time.Now().Add(-time.Hour)); err != nil ||
		len(accounts) != 1 || accounts[0] != "acct_1ConnectedAcct" {
		t.Errorf("AccountsSeen(thin) = %v, %v; want [acct_1ConnectedAcct]", accounts, err)
	}
}

// A ping is answered, recorded as its endpoint's last ping, and never
// forwarded nor marked.
func TestReceive_PingIsRecordedAndNeverForwarded(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	a, proc := newApp(t)
	r := receiver.New(store, discardLogger, receiver.Config{Endpoints: threeEndpoints(t), Processor: proc})
	// Stripe pings destinations of either payload style.
	for _, secret := range []string{"whsec_thin", "whsec_account"} {
		body := stripeevent.Ping(stripeevent.NewID("evt"), "ed_1")
		if got, err := receive(t, r, body, secret); err != nil || got != receiver.Pinged {
			t.Fatalf("ping through %s: got %v, %v; want pinged", secret, got, err)
		}
	}
	if n := len(a.got()); n != 0 {
		t.Errorf("the app got %d requests, want none", n)
	}
	if got := queuetest.Markers(t, bundle.pool) + bundle.queued(t); got != 0 {
		t.Errorf("markers and queue rows: got %d, want none", got)
	}
	activity, err := store.EndpointsActivity(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	pinged := map[string]bool{}
	for _, e := range activity {
		pinged[e.Endpoint] = e.LastPingAt != nil && e.LastEventAt == nil
	}
	if !pinged["thin"] || !pinged["account"] || len(activity) != 2 {
		t.Errorf("endpoints' activity = %+v, want thin and account pinged, no event", activity)
	}
}

// Each endpoint's secrets land deliveries on its label, and a secret of
// one endpoint is never accepted for a body that belongs to another: a
// thin event through a snapshot endpoint, a snapshot event through a thin
// one, a connected account's event through an endpoint not declared
// Connect. Those are refused, saying why, and nothing is stored.
func TestReceive_ThreeEndpointsEachSecretOnItsLabel(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	a, proc := newApp(t)
	r := receiver.New(store, discardLogger, receiver.Config{Endpoints: threeEndpoints(t), Processor: proc})

	accepted := []struct {
		secret, label, account string
		body                   []byte
	}{
		{"whsec_account", "account", "", stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")},
		{"whsec_account_old", "account", "", stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")},
		{"whsec_connect", "connect", "acct_1A", stripeevent.Connect(stripeevent.NewID("evt"), "invoice.paid", "acct_1A", true)},
		{"whsec_thin", "thin", "", stripeevent.Thin(stripeevent.NewID("evt"), "invoice.paid", stripeevent.NewID("evt"))},
	}
	for _, c := range accepted {
		if got, err := receive(t, r, c.body, c.secret); err != nil || got != receiver.Processed {
			t.Fatalf("%s: got %v, %v; want processed", c.secret, got, err)
		}
	}
	reqs := a.got()
	if len(reqs) != len(accepted) {
		t.Fatalf("the app got %d requests, want %d", len(reqs), len(accepted))
	}
	for i, c := range accepted {
		if got := reqs[i].header.Get("Hookd-Endpoint"); got != c.label {
			t.Errorf("%s: Hookd-Endpoint %q, want %q", c.secret, got, c.label)
		}
		if got := reqs[i].header.Get("Hookd-Stripe-Account"); got != c.account {
			t.Errorf("%s: Hookd-Stripe-Account %q, want %q", c.secret, got, c.account)
		}
	}

}

// A correctly signed event is never refused for what its endpoint
// declares: its signature proves Stripe sent it, and its shape says what
// it is. A thin event through a snapshot endpoint, a snapshot event through
// a thin one, a connected account's event (or a thin event's context)
// through an endpoint not declared Connect: each is processed once, reaches
// the app with its endpoint, mode and account, and is recorded as having
// arrived through its endpoint.
func TestReceive_EveryShapeThroughEveryEndpointIsAccepted(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	a, proc := newApp(t)
	r := receiver.New(store, discardLogger, receiver.Config{Endpoints: threeEndpoints(t), Processor: proc})

	contradicting := []struct {
		secret, label, account, says string
		body                         []byte
	}{
		{"whsec_account", "account", "", "a thin event through a snapshot endpoint",
			stripeevent.Thin(stripeevent.NewID("evt"), "invoice.paid", stripeevent.NewID("evt"))},
		{"whsec_connect", "connect", "", "a thin event through a snapshot endpoint declared Connect",
			stripeevent.Thin(stripeevent.NewID("evt"), "invoice.paid", stripeevent.NewID("evt"))},
		{"whsec_thin", "thin", "", "a snapshot event through a thin endpoint",
			stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")},
		{"whsec_account", "account", "acct_1A", "a Connect event through an endpoint not declared Connect",
			stripeevent.Connect(stripeevent.NewID("evt"), "invoice.paid", "acct_1A", true)},
		{"whsec_thin", "thin", "acct_1A", "a thin event with context through an endpoint not declared Connect",
			stripeevent.ThinEvent{ID: stripeevent.NewID("evt"), Type: "v1.invoice.paid", Created: time.Now(), Context: "acct_1A"}.JSON()},
	}
	for _, c := range contradicting {
		if got, err := receive(t, r, c.body, c.secret); err != nil || got != receiver.Processed {
			t.Fatalf("%s: got %v, %v; want processed", c.says, got, err)
		}
	}
	reqs := a.got()
	if len(reqs) != len(contradicting) {
		t.Fatalf("the app got %d requests, want %d, one per event", len(reqs), len(contradicting))
	}
	for i, c := range contradicting {
		h := reqs[i].header
		if h.Get("Hookd-Endpoint") != c.label || h.Get("Hookd-Stripe-Account") != c.account || h.Get("Hookd-Livemode") == "" {
			t.Errorf("%s: Hookd-Endpoint %q, Hookd-Stripe-Account %q, Hookd-Livemode %q; want %q, %q and a mode",
				c.says, h.Get("Hookd-Endpoint"), h.Get("Hookd-Stripe-Account"), h.Get("Hookd-Livemode"), c.label, c.account)
		}
	}
	if got := queuetest.Markers(t, bundle.pool); got != int64(len(contradicting)) {
		t.Errorf("%d markers, want %d", got, len(contradicting))
	}

	arrived, err := store.EndpointsArrived(t.Context(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	want := []queue.EndpointArrived{
		{Endpoint: "account", Thin: true, Snapshot: true, Connect: true},
		{Endpoint: "connect", Thin: true},
		{Endpoint: "thin", Thin: true, Snapshot: true, Connect: true},
	}
	if fmt.Sprint(arrived) != fmt.Sprint(want) {
		t.Errorf("arrived %+v, want %+v", arrived, want)
	}
}

// With one endpoint there is no other a body could belong to: it accepts
// every shape, as before endpoints had labels.
func TestReceive_OneEndpointAcceptsEveryShape(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	r := newReceiver(store, &countingProcessor{})
	for _, body := range [][]byte{
		stripeevent.Thin(stripeevent.NewID("evt"), "invoice.paid", stripeevent.NewID("evt")),
		stripeevent.Connect(stripeevent.NewID("evt"), "invoice.paid", "acct_1A", false),
	} {
		if got, err := receive(t, r, body, testSecret); err != nil || got != receiver.Processed {
			t.Errorf("got %v, %v; want processed", got, err)
		}
	}
}

// A failed event's queue row keeps its endpoint and what the receiver
// read, and the retry sends the same headers as the first attempt.
func TestReceive_QueueRowKeepsWhatWasRead(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	a, proc := newApp(t)
	a.status = http.StatusInternalServerError
	r := receiver.New(store, discardLogger, receiver.Config{Endpoints: threeEndpoints(t), Processor: proc})
	id := stripeevent.NewID("evt")
	body := stripeevent.Event{ID: id, Type: "customer.updated", Created: time.Now(), Account: "acct_1B", Livemode: true,
		APIVersion: "2024-06-20", Object: []byte(`{"id":"cus_9","object":"customer"}`)}.JSON()
	if got, err := receive(t, r, body, "whsec_connect"); err != nil || got != receiver.Queued {
		t.Fatalf("got %v, %v; want queued", got, err)
	}
	e, err := store.EventByEventID(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	m := e.EventMeta
	if m.Endpoint != "connect" || m.Livemode == nil || !*m.Livemode || str(m.Account) != "acct_1B" ||
		str(m.APIVersion) != "2024-06-20" || str(m.ObjectID) != "cus_9" || str(m.ObjectType) != "customer" ||
		str(m.Customer) != "cus_9" || m.SnapshotEvent != nil {
		t.Errorf("queue row's meta = %s", fmt.Sprintf("%+v", m))
	}

	if _, err := bundle.pool.Exec(t.Context(), `UPDATE webhook_events SET next_retry_at = now()`); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	a.status = http.StatusOK
	a.mu.Unlock()
	retrier := worker.NewRetrier(store, discardLogger, worker.ProducerConfig{Processor: proc})
	if n, err := retrier.RunBatch(t.Context()); err != nil || n != 1 {
		t.Fatalf("RunBatch = %d, %v; want 1 event claimed", n, err)
	}
	reqs := a.got()
	if len(reqs) != 2 {
		t.Fatalf("the app got %d requests, want 2", len(reqs))
	}
	for i, req := range reqs {
		if req.header.Get("Hookd-Endpoint") != "connect" || req.header.Get("Hookd-Livemode") != "true" ||
			req.header.Get("Hookd-Stripe-Account") != "acct_1B" {
			t.Errorf("request %d: headers %v", i, req.header)
		}
	}
}

func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Test-mode events follow their endpoint's test_events: forwarded,
// discarded (marked, never forwarded), or held on the queue, dead and
// unannounced, for a person.
func TestReceive_TestModeEventsFollowTheirEndpoint(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	a, proc := newApp(t)
	eps := threeEndpoints(t)
	if err := endpoint.Configure(eps, "account:test_events=discard;connect:test_events=queue-only"); err != nil {
		t.Fatal(err)
	}
	r := receiver.New(store, discardLogger, receiver.Config{Endpoints: eps, Processor: proc})
	discarded := stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")
	heldID := stripeevent.NewID("evt")
	held := stripeevent.Connect(heldID, "invoice.paid", "acct_1A", false)
	live := stripeevent.Connect(stripeevent.NewID("evt"), "invoice.paid", "acct_1A", true)
	for _, c := range []struct {
		body   []byte
		secret string
		want   receiver.Outcome
	}{
		{discarded, "whsec_account", receiver.TestDiscarded},
		{discarded, "whsec_account", receiver.Duplicate},
		{held, "whsec_connect", receiver.Held},
		{held, "whsec_connect", receiver.AlreadyQueued},
		{live, "whsec_connect", receiver.Processed},
	} {
		if got, err := receive(t, r, c.body, c.secret); err != nil || got != c.want {
			t.Fatalf("got %v, %v; want %v", got, err, c.want)
		}
	}
	if reqs := a.got(); len(reqs) != 1 || reqs[0].body != string(live) {
		t.Errorf("the app got %d requests, want only the live event", len(reqs))
	}
	e, err := store.EventByEventID(t.Context(), heldID)
	if err != nil {
		t.Fatal(err)
	}
	if e.Status != queue.StatusDead || e.Attempts != 0 {
		t.Errorf("held event: status %s, %d attempts; want dead with none", e.Status, e.Attempts)
	}
	if got := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM webhook_events WHERE dead_alerted_at IS NULL`); got != 0 {
		t.Errorf("%d held events would be announced as deaths", got)
	}
}

// A generation-failure notice signed with a declared snapshot endpoint's
// secret (a person sending one by hand with the wrong -endpoint) is
// Stripe's word about itself, not an event of that endpoint: it is
// accepted, and the endpoint is still recorded as receiving only snapshot
// events, so its declaration is contradicted by nothing. A thin event
// through it still is.
func TestReceive_NoticeThroughSnapshotEndpointContradictsNothing(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	_, proc := newApp(t)
	eps := threeEndpoints(t)
	if err := endpoint.Configure(eps, "account:kind=snapshot"); err != nil {
		t.Fatal(err)
	}
	r := receiver.New(store, discardLogger, receiver.Config{Endpoints: eps, Processor: proc})
	for _, body := range [][]byte{
		stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid"),
		stripeevent.GenerationFailure(stripeevent.NewID("evt")),
	} {
		if got, err := receive(t, r, body, "whsec_account"); err != nil || got != receiver.Processed {
			t.Fatalf("got %v, %v; want processed", got, err)
		}
	}
	arrived, err := store.EndpointsArrived(t.Context(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if want := []queue.EndpointArrived{{Endpoint: "account", Snapshot: true}}; fmt.Sprint(arrived) != fmt.Sprint(want) {
		t.Errorf("arrived %+v, want %+v", arrived, want)
	}
	if says := endpoint.AllContradictions(eps, arrived); len(says) != 0 {
		t.Errorf("contradictions %q, want none", says)
	}

	thin := stripeevent.Thin(stripeevent.NewID("evt"), "invoice.paid", stripeevent.NewID("evt"))
	if got, err := receive(t, r, thin, "whsec_account"); err != nil || got != receiver.Processed {
		t.Fatalf("thin event: got %v, %v; want processed", got, err)
	}
	arrived, err = store.EndpointsArrived(t.Context(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if says := endpoint.AllContradictions(eps, arrived); len(says) != 1 {
		t.Errorf("after a thin event: contradictions %q, want one", says)
	}
}
