package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue/queuetest"
)

// TestBodyMemory_SilentSendersDoNotExhaustMemory is the slow-loris attack on
// the receiver, against the real binary: 2,000 connections each send the
// header of a webhook POST declaring a 1 MiB body, and then nothing; they
// are closed and opened again, three times. While hookd holds the last
// wave, real signed deliveries arrive. Every real delivery
// is answered 200, and hookd's peak resident memory (VmHWM) stays under
// 150 MiB: a body is held as it arrives, not as it is declared.
func TestBodyMemory_SilentSendersDoNotExhaustMemory(t *testing.T) {
	t.Parallel()
	const silent, waves, deliveries, declared = 2000, 3, 200, 1 << 20
	const peakLimit = 150 << 20

	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	defer app.Close()
	bin := buildHookdBinary(t)
	p := startHookdProcess(t, bin, []string{
		"DATABASE_URL=" + setup(t).dbURL,
		"STRIPE_WEBHOOK_SECRET=" + testSecret,
		"HOOKD_FORWARD_URL=" + app.URL,
		// The test reads hookd's gauges from the address it posts to.
		"HOOKD_METRICS_PUBLIC=true",
	})
	defer func() {
		if err := p.terminate(); err != nil {
			t.Errorf("stop hookd: %v\n%s", err, p.log)
		}
	}()
	atRest := procStatusKiB(t, p.cmd.Process.Pid, "VmHWM")

	// An attacker whose connections are cut off, by the read timeout or
	// by anything else, comes back with new ones: the first wave meets
	// memory fresh from the kernel, the later ones memory the earlier
	// waves' bodies left behind.
	addr := strings.TrimPrefix(p.base, "http://")
	header := fmt.Sprintf("POST /webhooks/stripe HTTP/1.1\r\nHost: hookd\r\nContent-Type: application/json\r\n"+
		"Stripe-Signature: t=1,v1=00\r\nContent-Length: %d\r\n\r\n", declared)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for wave := 1; wave <= waves; wave++ {
		for _, c := range conns {
			c.Close()
		}
		conns = conns[:0]
		// net/http keeps a connection answered before its body was read
		// for half a second, so that the client sees the answer.
		queuetest.WaitFor(t, 25*time.Second, "hookd to let go of the last wave's connections", func() bool {
			return scrapeGauge(p.base, "hookd_receiver_bodies_reading") == 0 && scrapeGauge(p.base, "go_goroutines") < 100
		})
		for range silent {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatalf("wave %d, connection %d of %d: %v", wave, len(conns)+1, silent, err)
			}
			conns = append(conns, c)
			if _, err := io.WriteString(c, header); err != nil {
				t.Fatal(err)
			}
		}
		queuetest.WaitFor(t, 25*time.Second, "hookd to be reading every silent body", func() bool {
			return scrapeGauge(p.base, "hookd_receiver_bodies_reading") == silent
		})
		t.Logf("wave %d of %d silent senders: VmHWM %d KiB", wave, silent, procStatusKiB(t, p.cmd.Process.Pid, "VmHWM"))
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 20}, Timeout: 20 * time.Second}
	defer client.CloseIdleConnections()
	statuses := make(map[string]int)
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan string)
	for range 20 {
		wg.Go(func() {
			for id := range work {
				body := stripeevent.Minimal(id, "invoice.paid")
				req, _ := http.NewRequest(http.MethodPost, p.base+"/webhooks/stripe", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Stripe-Signature", stripeevent.Sign(body, testSecret, time.Now()))
				answer := "error"
				if resp, err := client.Do(req); err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					answer = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
				}
				mu.Lock()
				statuses[answer]++
				mu.Unlock()
			}
		})
	}
	for range deliveries {
		work <- stripeevent.NewID("evt")
	}
	close(work)
	wg.Wait()
	if statuses["200 processed"] != deliveries {
		t.Errorf("real deliveries answered %v; want all %d 200 processed", statuses, deliveries)
	}
	// The silent connections were all still held when the peak was read.
	if n := scrapeGauge(p.base, "hookd_receiver_bodies_reading"); n != silent {
		t.Errorf("hookd was reading %d bodies after the deliveries, want still the %d silent ones", n, silent)
	}
	peak := procStatusKiB(t, p.cmd.Process.Pid, "VmHWM")
	t.Logf("VmHWM at rest %d KiB; after %d waves of %d silent 1 MiB bodies and %d deliveries %d KiB",
		atRest, waves, silent, deliveries, peak)
	if peak*1024 >= peakLimit {
		t.Errorf("peak resident memory %d MiB with %d silent senders, want under %d MiB", peak/1024, silent, peakLimit>>20)
	}
}

// procStatusKiB reads a field in kB of /proc/<pid>/status, such as VmHWM,
// the process's peak resident memory.
func procStatusKiB(t testing.TB, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", field, v)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// scrapeGauge reads an unlabelled gauge from base's /metrics; -1 when it
// cannot.
func scrapeGauge(base, name string) int64 {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	s := bufio.NewScanner(resp.Body)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return -1
			}
			return int64(f)
		}
	}
	return -1
}
