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

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/destinations"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue"
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
	events, ids, payloads := orderedEvents(customers, perCustomer)
	ordered := newOrderedApp(t, events)
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
	bases := startReplicas(t, 3, env)

	answered := sendOrdered(t, bases, ids, payloads)
	if t.Failed() {
		return
	}
	n := ordered.checkDelivered(t, b.pool, customers, perCustomer, 20)
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
	t.Logf("%d calls to the ordered app", n)
}

// orderedSent is an event the order tests send: its customer, its place
// in that customer's sends, and its type.
type orderedSent struct {
	customer string
	index    int
	typ      string
}

// orderedEvents are perCustomer signed events of each of customers
// customers, by id; and their ids and payloads by customer, in the order
// each customer's are sent.
func orderedEvents(customers, perCustomer int) (map[string]orderedSent, [][]string, [][][]byte) {
	types := []string{"invoice.created", "invoice.paid", "customer.updated"}
	events := map[string]orderedSent{}
	payloads := make([][][]byte, customers)
	ids := make([][]string, customers)
	for c := range customers {
		customer := fmt.Sprintf("cus_order%02d", c)
		for i := range perCustomer {
			id, typ := stripeevent.NewID("evt"), types[i%len(types)]
			events[id] = orderedSent{customer: customer, index: i, typ: typ}
			ids[c] = append(ids[c], id)
			payloads[c] = append(payloads[c], fmt.Appendf(nil, `{"id":%q,"object":"event","type":%q,"livemode":false,`+
				`"created":%d,"api_version":"2024-06-20","data":{"object":{"id":"in_%d_%d","object":"invoice",`+
				`"customer":%q,"amount":%d}}}`, id, typ, time.Now().Unix(), c, i, customer, (c*perCustomer+i)*37%2000))
		}
	}
	return events, ids, payloads
}

// orderedApp is the app of an ordered destination: it records each call
// with its customer and place, and any two calls of one customer at
// once; one call in ten fails, the first of every tenth event.
type orderedApp struct {
	*leaseApp
	mu       sync.Mutex
	calls    []orderedCall
	inFlight map[string]int
	overlaps map[string]int
}

func newOrderedApp(t *testing.T, events map[string]orderedSent) *orderedApp {
	app := &orderedApp{inFlight: map[string]int{}, overlaps: map[string]int{}}
	callsOf := map[string]int{}
	app.leaseApp = newLeaseApp(t, func(r *http.Request) int {
		id := r.Header.Get("Hookd-Event-Id")
		app.mu.Lock()
		e := events[id]
		c := orderedCall{customer: e.customer, index: e.index, start: time.Now()}
		app.inFlight[e.customer]++
		if app.inFlight[e.customer] > 1 {
			app.overlaps[e.customer]++
		}
		callsOf[id]++
		c.ok = e.index%10 != 3 || callsOf[id] > 1
		app.mu.Unlock()
		time.Sleep(2 * time.Millisecond) // the app's own work, for calls to overlap if they could
		app.mu.Lock()
		app.inFlight[e.customer]--
		c.end = time.Now()
		app.calls = append(app.calls, c)
		app.mu.Unlock()
		if !c.ok {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	return app
}

// record returns the calls the app got, and the overlaps by customer.
func (app *orderedApp) record() ([]orderedCall, map[string]int) {
	app.mu.Lock()
	defer app.mu.Unlock()
	return slices.Clone(app.calls), maps.Clone(app.overlaps)
}

// checkDelivered waits until every event is processed and the queue is
// empty, then checks the app got each customer's events in order at no
// more than perSecond; it returns the calls the app got.
func (app *orderedApp) checkDelivered(t *testing.T, pool *pgxpool.Pool, customers, perCustomer, perSecond int) int {
	t.Helper()
	queuetest.WaitFor(t, 120*time.Second, "every event processed and the queue empty", func() bool {
		markers, rows, ok := queueState(pool)
		return ok && markers == customers*perCustomer && rows == 0
	})
	got, overlaps := app.record()
	checkOrdered(t, got, overlaps, customers, perCustomer)
	checkRate(t, got, perSecond)
	return len(got)
}

// startReplicas starts n replicas of hookd serve with env, stopped when
// the test ends, and returns their base URLs.
func startReplicas(t *testing.T, n int, env map[string]string) []string {
	var bases []string
	for range n {
		base, stop, stderr := startServe(t, maps.Clone(env))
		t.Cleanup(func() {
			if err := stop(); err != nil {
				t.Errorf("stop: %v\n%s", err, stderr)
			}
		})
		bases = append(bases, base)
	}
	return bases
}

// sendOrdered sends each customer's events one after another, as Stripe
// does, the customers at once, spread over the replicas at bases; it
// returns when each was answered.
func sendOrdered(t *testing.T, bases []string, ids [][]string, payloads [][][]byte) map[string]time.Time {
	answered := map[string]time.Time{}
	var answeredMu sync.Mutex
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 30 * time.Second}
	for c := range ids {
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
	return answered
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
	if most := mostInOneSecond(at); most > perSecond+1 {
		t.Errorf("%d calls to the ordered app in one 1 s window, want at most %d and one of tolerance", most, perSecond)
	}
}

// mostInOneSecond is the most of the times at that fall in one 1 s
// window; it sorts at.
func mostInOneSecond(at []time.Time) int {
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	most := 0
	for i := range at {
		n := 0
		for j := i; j < len(at) && at[j].Sub(at[i]) < time.Second; j++ {
			n++
		}
		most = max(most, n)
	}
	return most
}

// TestFanout_ADashboardDestinationIsOrderedAndPaced proves that a
// destination an admin adds on the dashboard with a rate and an order_by
// is delivered with both, as a file's is: two replicas beside
// HOOKD_FORWARD_URL's default, 80 signed events of four customers, one
// call in ten to the ordered app failing. Each customer's events reach it
// in the order they were sent, none while an earlier one is unanswered;
// the rate holds in every 1 s window across the replicas, with one call
// of tolerance; the default gets each event once.
func TestFanout_ADashboardDestinationIsOrderedAndPaced(t *testing.T) {
	const customers, perCustomer, rate = 4, 20, 10
	events, ids, payloads := orderedEvents(customers, perCustomer)
	ordered := newOrderedApp(t, events)
	main := newLeaseApp(t, func(*http.Request) int { return http.StatusOK })
	b := setup(t)
	d, err := destinations.CheckEntry(destinations.Entry{Name: "ordered", URL: ordered.srv.URL, Rate: rate,
		OrderBy: "data.object.customer", Source: destinations.SourceDashboard})
	if err != nil {
		t.Fatal(err)
	}
	store := queue.New(b.pool)
	if err := store.InTx(t.Context(), func(tx *queue.Tx) error {
		return tx.AddManagedDestination(t.Context(), queue.ManagedWrite{Destination: d, By: "ana@example.com"}, nil)
	}); err != nil {
		t.Fatal(err)
	}
	bases := startReplicas(t, 2, map[string]string{"DATABASE_URL": b.dbURL, "STRIPE_WEBHOOK_SECRET": testSecret,
		"HOOKD_FORWARD_URL": main.srv.URL, "HOOKD_DEMO_BACKOFF": "true", "HOOKD_RETRY_INTERVAL": "200ms"})

	sendOrdered(t, bases, ids, payloads)
	if t.Failed() {
		return
	}
	n := ordered.checkDelivered(t, b.pool, customers, perCustomer, rate)
	for id := range events {
		if n := main.calls()[id]; n != 1 {
			t.Errorf("the default got %s %d times, want once", id, n)
		}
	}
	t.Logf("%d calls to the ordered app", n)
}
