package main

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue/queuetest"
)

// orderedCall is one call the ordered app got.
type orderedCall struct {
	customer   string
	index      int // the event's place in its customer's sends
	start, end time.Time
	ok         bool
}

// TestFanout_OrderPerKeyAcrossReplicas proves issue 44's first claim
// against three running replicas on one database: three destinations
// (billing takes invoice.*, big a CEL filter on the amount and fails for
// its first 12 s, ordered takes every event at 20 a second, ordered by
// customer, and fails one call in ten), and 300 signed events of ten
// customers, each customer's sent one after another as Stripe sends
// them, spread over the replicas. Each customer's events reach the
// ordered app in the order they were sent, none while an earlier one of
// that customer is unanswered; the rate holds in every 1 s window, with
// one call of tolerance, across the replicas; billing gets each of its
// events once, while Stripe waits; and every event ends processed.
func TestFanout_OrderPerKeyAcrossReplicas(t *testing.T) {
	const customers, perCustomer = 10, 30
	type sent struct {
		customer string
		index    int
		typ      string
	}
	events := map[string]sent{}
	var mu sync.Mutex
	var calls []orderedCall
	inFlight := map[string]int{}
	overlaps := map[string]int{}
	callsOf := map[string]int{}
	ordered := newLeaseApp(t, func(r *http.Request) int {
		mu.Lock()
		e := events[r.Header.Get("Hookd-Event-Id")]
		c := orderedCall{customer: e.customer, index: e.index, start: time.Now()}
		inFlight[e.customer]++
		if inFlight[e.customer] > 1 {
			overlaps[e.customer]++
		}
		callsOf[r.Header.Get("Hookd-Event-Id")]++
		// One call in ten fails: the first of every tenth event.
		c.ok = e.index%10 != 3 || callsOf[r.Header.Get("Hookd-Event-Id")] > 1
		mu.Unlock()
		time.Sleep(2 * time.Millisecond) // the app's own work, for calls to overlap if they could
		mu.Lock()
		inFlight[e.customer]--
		c.end = time.Now()
		calls = append(calls, c)
		mu.Unlock()
		if !c.ok {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	var bigMu sync.Mutex
	var firstBig time.Time
	big := newLeaseApp(t, func(*http.Request) int {
		bigMu.Lock()
		defer bigMu.Unlock()
		if firstBig.IsZero() {
			firstBig = time.Now()
		}
		if time.Since(firstBig) < 12*time.Second {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	billing := newLeaseApp(t, func(*http.Request) int { return http.StatusOK })
	file := filepath.Join(t.TempDir(), "destinations.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, `destinations:
  - name: billing
    url: %s
    types: ["invoice.*"]
  - name: big
    url: %s
    filter: "has(data.object.amount) && data.object.amount >= 1000"
  - name: ordered
    url: %s
    rate: 20
    order_by: data.object.customer
`, billing.srv.URL, big.srv.URL, ordered.srv.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	b := setup(t)
	env := map[string]string{"DATABASE_URL": b.dbURL, "STRIPE_WEBHOOK_SECRET": testSecret,
		"HOOKD_DESTINATIONS_FILE": file, "HOOKD_DEMO_BACKOFF": "true", "HOOKD_RETRY_INTERVAL": "200ms"}
	var bases []string
	for range 3 {
		base, stop, stderr := startServe(t, maps.Clone(env))
		defer func() {
			if err := stop(); err != nil {
				t.Errorf("stop: %v\n%s", err, stderr)
			}
		}()
		bases = append(bases, base)
	}

	types := []string{"invoice.created", "invoice.paid", "customer.updated"}
	payloads := make([][][]byte, customers)
	ids := make([][]string, customers)
	for c := range customers {
		customer := fmt.Sprintf("cus_order%02d", c)
		for i := range perCustomer {
			id, typ := stripeevent.NewID("evt"), types[i%len(types)]
			events[id] = sent{customer: customer, index: i, typ: typ}
			ids[c] = append(ids[c], id)
			payloads[c] = append(payloads[c], fmt.Appendf(nil, `{"id":%q,"object":"event","type":%q,"livemode":false,`+
				`"created":%d,"api_version":"2024-06-20","data":{"object":{"id":"in_%d_%d","object":"invoice",`+
				`"customer":%q,"amount":%d}}}`, id, typ, time.Now().Unix(), c, i, customer, (c*perCustomer+i)*37%2000))
		}
	}
	answered := map[string]time.Time{}
	var answeredMu sync.Mutex
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 30 * time.Second}
	for c := range customers {
		wg.Go(func() {
			for i, id := range ids[c] {
				s := &stripeSender{id: id, payload: payloads[c][i]}
				s.deliver(client, bases[(c+i)%len(bases)], time.Now().Add(30*time.Second), 100*time.Millisecond)
				if s.err != nil || s.answered.IsZero() {
					t.Errorf("%s: no 2xx: %v (statuses %v)", id, s.err, s.statuses)
					return
				}
				answeredMu.Lock()
				answered[id] = s.answered
				answeredMu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	queuetest.WaitFor(t, 120*time.Second, "every event processed and the queue empty", func() bool {
		markers, rows, ok := queueState(b.pool)
		return ok && markers == customers*perCustomer && rows == 0
	})

	mu.Lock()
	got := slices.Clone(calls)
	mu.Unlock()
	checkOrdered(t, got, overlaps, customers, perCustomer)
	checkRate(t, got, 20)
	arrivals, _ := billing.seen()
	for id, e := range events {
		if e.typ == "customer.updated" {
			continue
		}
		at := arrivals[id]
		if len(at) != 1 {
			t.Errorf("billing got %s %d times, want once", id, len(at))
			continue
		}
		if gap := answered[id].Sub(at[0]); gap < 0 || gap > time.Second {
			t.Errorf("billing got %s %v before hookd's 200, want while Stripe waited", id, gap)
		}
	}
	t.Logf("%d calls to the ordered app", len(got))
}

// checkOrdered checks that each customer's events reached the ordered
// app in the order they were sent, the next only after the previous one
// was answered with a success, and none twice at once.
func checkOrdered(t *testing.T, calls []orderedCall, overlaps map[string]int, customers, perCustomer int) {
	t.Helper()
	if len(overlaps) > 0 {
		t.Errorf("a customer's events in the ordered app at once: %v", overlaps)
	}
	slices.SortFunc(calls, func(a, b orderedCall) int { return a.start.Compare(b.start) })
	byCustomer := map[string][]orderedCall{}
	for _, c := range calls {
		byCustomer[c.customer] = append(byCustomer[c.customer], c)
	}
	if len(byCustomer) != customers {
		t.Errorf("the ordered app got the events of %d customers, want %d", len(byCustomer), customers)
	}
	for customer, cs := range byCustomer {
		next := 0 // the index of the event whose turn it is
		for _, c := range cs {
			if c.index != next {
				t.Errorf("%s: event %d arrived while event %d had not succeeded", customer, c.index, next)
				break
			}
			if c.ok {
				next++
			}
		}
		if next != perCustomer {
			t.Errorf("%s: %d of %d events succeeded in order", customer, next, perCustomer)
		}
	}
}

// checkRate checks that the calls kept to perSecond in every 1 s window,
// with one call of tolerance.
func checkRate(t *testing.T, calls []orderedCall, perSecond int) {
	t.Helper()
	at := make([]time.Time, len(calls))
	for i, c := range calls {
		at[i] = c.start
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	most := 0
	for i := range at {
		n := 0
		for j := i; j < len(at) && at[j].Sub(at[i]) < time.Second; j++ {
			n++
		}
		most = max(most, n)
	}
	if most > perSecond+1 {
		t.Errorf("%d calls to the ordered app in one 1 s window, want at most %d and one of tolerance", most, perSecond)
	}
}
