package web_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/internal/telemetry"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/web"
	"github.com/hookd/hookd/worker"
)

// newBodyServer starts hookd's handler with the body limits given and
// processor p, serving /metrics.
func newBodyServer(t *testing.T, p worker.Processor, maxBody, maxBodyMemory int64) *httptest.Server {
	t.Helper()
	store := setup(t, withoutServer()).store
	reg := prometheus.NewRegistry()
	metrics := telemetry.NewMetrics(reg, nil)
	rcv := receiver.New(store, discardLogger, receiver.Config{
		Secrets: []string{testSecret}, Processor: p, Metrics: metrics})
	srv := httptest.NewServer(web.NewServer(web.Options{Logger: discardLogger, Stores: web.Stores{Queue: store},
		Receiver: rcv, Metrics: metrics, Gatherer: reg, MaxBody: maxBody, MaxBodyMemory: maxBodyMemory}))
	t.Cleanup(srv.Close)
	return srv
}

// eventOfSize returns an event with id whose JSON is exactly size bytes.
func eventOfSize(t *testing.T, id string, size int) []byte {
	t.Helper()
	event := func(pad int) []byte {
		return stripeevent.Event{ID: id, Type: "invoice.paid", Created: time.Now(),
			Object: fmt.Appendf(nil, `{"id":"in_1","object":"invoice","pad":"%s"}`, strings.Repeat("a", pad))}.JSON()
	}
	body := event(size - len(event(0)))
	if len(body) != size {
		t.Fatalf("event of %d bytes came out %d", size, len(body))
	}
	return body
}

// metric reads one sample of srv's /metrics, such as
// `hookd_receiver_bodies_reading` or `hookd_webhooks_received_total{outcome="processed"}`;
// -1 when it is not there.
func metric(t *testing.T, srv *httptest.Server, sample string) int64 {
	t.Helper()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	s := bufio.NewScanner(resp.Body)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %q", sample, v)
			}
			return int64(f)
		}
	}
	return -1
}

// Bodies of every size around the pieces they are read in, declared or
// sent chunked, all at once, in three rounds, so that pooled pieces are
// reused while earlier payloads are still held: each reaches the processor
// byte for byte. One byte over the limit is a 413 either way.
func TestReceiverBody_EverySizeArrivesIntact(t *testing.T) {
	t.Parallel()
	const maxBody = 256 << 10
	var mu sync.Mutex
	got := map[string][]byte{}
	srv := newBodyServer(t, worker.ProcessorFunc(func(_ context.Context, d worker.Delivery) worker.Result {
		mu.Lock()
		got[d.EventID] = d.Payload
		mu.Unlock()
		return worker.Result{}
	}), maxBody, 0)

	sizes := []int{400, 1023, 1024, 1025, 2048, 3000, 16<<10 - 1, 16 << 10, 16<<10 + 1, 40000, 100 << 10, maxBody}
	type sent struct {
		id   string
		body []byte
	}
	var wg sync.WaitGroup
	var all []sent
	for round := range 3 {
		for _, size := range sizes {
			for _, chunked := range []bool{false, true} {
				id := stripeevent.NewID("evt")
				body := eventOfSize(t, id, size)
				all = append(all, sent{id, body})
				wg.Go(func() {
					var r io.Reader = bytes.NewReader(body)
					if chunked {
						// A reader of unknown length makes the client send
						// the body chunked, with no Content-Length.
						r = struct{ io.Reader }{r}
					}
					req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/stripe", r)
					req.Header.Set("Stripe-Signature", stripeevent.Sign(body, testSecret, time.Now()))
					if a := do(t, req); a.status != http.StatusOK || a.body != "processed\n" {
						t.Errorf("round %d, %d bytes, chunked %v: got %d %q, want 200 processed", round, size, chunked, a.status, a.body)
					}
				})
			}
		}
		// The next round reuses the pooled pieces of this one's bodies,
		// whose payloads the processor still holds.
		wg.Wait()
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range all {
		if !bytes.Equal(got[s.id], s.body) {
			t.Errorf("%s of %d bytes reached the processor as %d bytes, not byte for byte", s.id, len(s.body), len(got[s.id]))
		}
	}

	for _, chunked := range []bool{false, true} {
		body := eventOfSize(t, stripeevent.NewID("evt"), maxBody+1)
		var r io.Reader = bytes.NewReader(body)
		if chunked {
			r = struct{ io.Reader }{r}
		}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/stripe", r)
		req.Header.Set("Stripe-Signature", stripeevent.Sign(body, testSecret, time.Now()))
		if a := do(t, req); a.status != http.StatusRequestEntityTooLarge || a.body != receiver.ErrTooLarge.Error()+"\n" {
			t.Errorf("one byte over the limit, chunked %v: got %d %q, want 413 saying so", chunked, a.status, a.body)
		}
	}
	if n := metric(t, srv, "hookd_receiver_body_memory_bytes"); n != 0 {
		t.Errorf("%d bytes of body memory held once every body was answered, want 0", n)
	}
}

// The memory budget, raced: 100 senders declare 64 KiB and send one byte
// each, against a budget of 64 KiB. A body that has begun to arrive holds
// 1 KiB, so exactly 64 of them are read while the other 36 wait, then get
// 503 with Retry-After saying why; so does a real delivery arriving then.
// Once the 64 go away, their memory is back and a delivery is answered
// 200.
func TestReceiverBody_MemoryBudgetRefusesPastIt(t *testing.T) {
	t.Parallel()
	const senders, budget = 100, 64 << 10
	const holders = budget / (1 << 10)
	srv := newBodyServer(t, worker.Discard, budget, budget)

	type answer struct {
		status     int
		retryAfter string
		body       string
	}
	answers := make(chan answer, senders)
	conns := make([]net.Conn, senders)
	for i := range conns {
		c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
		if _, err := fmt.Fprintf(c, "POST /webhooks/stripe HTTP/1.1\r\nHost: hookd\r\nContent-Type: application/json\r\n"+
			"Stripe-Signature: t=1,v1=00\r\nContent-Length: %d\r\n\r\n{", budget); err != nil {
			t.Fatal(err)
		}
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return // a holder, closed by the test
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			answers <- answer{resp.StatusCode, resp.Header.Get("Retry-After"), string(b)}
		}()
	}

	var refused []answer
	queuetest.WaitFor(t, 30*time.Second, "36 senders refused and 64 read", func() bool {
		for {
			select {
			case a := <-answers:
				refused = append(refused, a)
				continue
			default:
			}
			return len(refused) == senders-holders && metric(t, srv, "hookd_receiver_bodies_reading") == holders
		}
	})
	if n := metric(t, srv, "hookd_receiver_body_memory_bytes"); n != budget {
		t.Errorf("the %d bodies being read hold %d bytes, want the whole budget of %d", holders, n, budget)
	}
	const why = "too many webhook bodies are being read at once; deliver again later\n"
	for _, a := range refused {
		if a.status != http.StatusServiceUnavailable || a.retryAfter != "10" || a.body != why {
			t.Errorf("a sender past the budget got %d, Retry-After %q, %q; want 503, 10, %q", a.status, a.retryAfter, a.body, why)
		}
	}

	body := stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")
	sig := stripeevent.Sign(body, testSecret, time.Now())
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/stripe", bytes.NewReader(body))
	req.Header.Set("Stripe-Signature", sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "10" || string(b) != why {
		t.Errorf("a delivery with the budget taken got %d, Retry-After %q, %q; want 503, 10, %q",
			resp.StatusCode, resp.Header.Get("Retry-After"), b, why)
	}
	if n := metric(t, srv, `hookd_webhooks_received_total{outcome="body_memory"}`); n != senders-holders+1 {
		t.Errorf("%d deliveries counted body_memory, want %d", n, senders-holders+1)
	}

	for _, c := range conns {
		c.Close()
	}
	queuetest.WaitFor(t, 10*time.Second, "the closed senders' memory back", func() bool {
		return metric(t, srv, "hookd_receiver_bodies_reading") == 0 && metric(t, srv, "hookd_receiver_body_memory_bytes") == 0
	})
	if a := post(t, srv, body, sig); a.status != http.StatusOK || a.body != "processed\n" {
		t.Errorf("the same delivery with the budget free got %d %q, want 200 processed", a.status, a.body)
	}
}
