package worker_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/hookd/hookd/internal/forwardsig"
	"github.com/hookd/hookd/worker"
)

// paidInvoices is a Processor run in hookd's process instead of the
// forwarder: it keeps the ids of the invoices paid.
type paidInvoices struct {
	mu  sync.Mutex
	ids map[string]bool
}

// Process records an invoice.paid event and accepts every other type, as an
// app accepts the event types it does not handle. It may run again for an
// event after a failure or a crash, so it is idempotent: a second run of
// one event changes nothing.
func (p *paidInvoices) Process(ctx context.Context, d worker.Delivery) worker.Result {
	if d.EventType != "invoice.paid" {
		return worker.Result{}
	}
	var event struct {
		Data struct {
			Object struct {
				ID string `json:"id"`
			} `json:"object"`
		} `json:"data"`
	}
	if err := json.Unmarshal(d.Payload, &event); err != nil {
		// The error's text becomes the event's last error on the dashboard.
		return worker.Result{Err: fmt.Errorf("invoice.paid %s: %w", d.EventID, err)}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ids[event.Data.Object.ID] = true
	return worker.Result{}
}

// A Processor handles each event hookd hands it. hookd runs it through
// worker.Process, under a time limit, one run at a time per event id.
func ExampleProcessor() {
	paid := &paidInvoices{ids: map[string]bool{}}
	var p worker.Processor = paid
	ctx := context.Background()

	d := worker.Delivery{
		EventID:   "evt_1",
		EventType: "invoice.paid",
		Payload:   []byte(`{"id":"evt_1","object":"event","type":"invoice.paid","data":{"object":{"id":"in_1","object":"invoice"}}}`),
	}
	res, _ := worker.Process(ctx, p, worker.DefaultProcessTimeout, d)
	fmt.Println("first run:", res.Err, paid.ids)

	d.Attempt = 1 // the same event again, as after a crash: nothing changes
	res, _ = worker.Process(ctx, p, worker.DefaultProcessTimeout, d)
	fmt.Println("second run:", res.Err, paid.ids)

	d.Payload = []byte(`{"id":"evt_1","data":`)
	res, _ = worker.Process(ctx, p, worker.DefaultProcessTimeout, d)
	fmt.Println("cut short:", worker.ErrorText(res.Err))
	// Output:
	// first run: <nil> map[in_1:true]
	// second run: <nil> map[in_1:true]
	// cut short: invoice.paid evt_1: unexpected end of JSON input
}

// ProcessorFunc makes a function a Processor. A failed Result queues the
// event for a retry; a panic fails the event, not the process.
func ExampleProcessorFunc() {
	ctx := context.Background()
	migrating := worker.ProcessorFunc(func(ctx context.Context, d worker.Delivery) worker.Result {
		if d.Attempt < 2 {
			return worker.Result{Err: errors.New("the ledger is read-only until its migration ends")}
		}
		return worker.Result{}
	})
	for attempt := range 3 {
		d := worker.Delivery{EventID: "evt_1", EventType: "invoice.paid", Attempt: attempt}
		res, _ := worker.Process(ctx, migrating, time.Second, d)
		fmt.Printf("attempt %d: %v\n", attempt, res.Err)
	}

	faulty := worker.ProcessorFunc(func(_ context.Context, d worker.Delivery) worker.Result {
		panic("no handler for " + d.EventType) // a bug in the handler
	})
	res, _ := worker.Process(ctx, faulty, time.Second, worker.Delivery{EventID: "evt_2", EventType: "invoice.paid"})
	fmt.Println(res.Err)
	// Output:
	// attempt 0: the ledger is read-only until its migration ends
	// attempt 1: the ledger is read-only until its migration ends
	// attempt 2: <nil>
	// processor panicked: no handler for invoice.paid
}

// The forwarder is hookd's default Processor: it POSTs the event's exact
// bytes to the app with hookd's headers and, with a secret, a Standard
// Webhooks signature the app verifies. This is what an app receives.
func ExampleNewForwarder() {
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("the key hookd and the app share"))
	key, _ := forwardsig.ParseSecret(secret) // the app's copy of HOOKD_FORWARD_SECRET

	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !forwardsig.Verify(r.Header, key, body, time.Now(), 5*time.Minute) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		for _, name := range []string{"Content-Type", "User-Agent", "Hookd-Event-Id", "Hookd-Event-Type",
			"Hookd-Attempt", "Hookd-Endpoint", "Hookd-Livemode", "Hookd-Stripe-Account", "Hookd-Replay", "Webhook-Id"} {
			if v := r.Header.Get(name); v != "" {
				fmt.Printf("%s: %s\n", name, v)
			}
		}
		fmt.Printf("body: %s\n", body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer app.Close()

	f, err := worker.NewForwarder(app.URL+"/stripe-events", secret)
	if err != nil {
		fmt.Println(err)
		return
	}
	livemode := false
	res := f.Process(context.Background(), worker.Delivery{
		EventID:   "evt_1",
		EventType: "invoice.paid",
		Payload:   []byte(`{"id":"evt_1","object":"event","type":"invoice.paid"}`),
		Attempt:   2,
		Endpoint:  "connect",
		Livemode:  &livemode,
		Account:   "acct_1",
	})
	fmt.Println("answer:", res.HTTPStatus, res.Err)
	// Output:
	// Content-Type: application/json
	// User-Agent: hookd
	// Hookd-Event-Id: evt_1
	// Hookd-Event-Type: invoice.paid
	// Hookd-Attempt: 2
	// Hookd-Endpoint: connect
	// Hookd-Livemode: false
	// Hookd-Stripe-Account: acct_1
	// Webhook-Id: evt_1
	// body: {"id":"evt_1","object":"event","type":"invoice.paid"}
	// answer: 204 <nil>
}
