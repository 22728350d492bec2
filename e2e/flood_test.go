package e2e

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookd/hookd/queue/queuetest"
)

// A flood of wrong passwords for one account from one address gets a
// handful of password checks, the rest 429, while Stripe's webhooks keep
// getting 200 and hookd's memory stays bounded (measured from outside the
// process, as the kernel counts it).
func TestLoginFlood_ThrottlesAndKeepsReceiving(t *testing.T) {
	t.Parallel()
	const (
		flood         = 300
		maxChecked    = 10
		rssLimitMB    = 256
		webhookSender = 4
	)
	h := startHookd(t)

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{
		Jar:           jar,
		Timeout:       60 * time.Second,
		Transport:     &http.Transport{MaxIdleConnsPerHost: flood},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Get(h.url("/login"))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="_csrf" value="([^"]+)"`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the sign-in page:\n%s", page)
	}
	form := url.Values{"email": {adminEmail}, "password": {"not the password"}, "_csrf": {string(m[1])}}.Encode()

	var (
		mu          sync.Mutex
		statuses    = map[int]int{}
		noRetryHint int
		floodWG     sync.WaitGroup
		start       = make(chan struct{})
	)
	for range flood {
		floodWG.Go(func() {
			<-start
			req, err := http.NewRequest(http.MethodPost, h.url("/login"), strings.NewReader(form))
			if err != nil {
				t.Error(err)
				return
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := client.Do(req)
			if err != nil {
				t.Errorf("sign-in: %v", err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			statuses[resp.StatusCode]++
			if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
				noRetryHint++
			}
		})
	}

	// Stripe keeps delivering through the flood: every sender posts until
	// the flood is over, at least three events each.
	var (
		floodOver  atomic.Bool
		senders    sync.WaitGroup
		delivered  atomic.Int64
		undelivers = make(chan string, 1000)
	)
	for range webhookSender {
		senders.Go(func() {
			<-start
			for n := 0; n < 3 || !floodOver.Load(); n++ {
				id, _, status, body, err := h.postEvent("invoice.paid", `{"id":"in_flood","object":"invoice"}`)
				if err != nil || status != http.StatusOK {
					undelivers <- id + ": " + strings.TrimSpace(string(body)) + " " + http.StatusText(status) + errText(err)
					continue
				}
				delivered.Add(1)
			}
		})
	}

	close(start)
	floodWG.Wait()
	floodOver.Store(true)
	senders.Wait()
	close(undelivers)

	for u := range undelivers {
		t.Errorf("webhook during the flood not answered 200: %s", u)
	}
	t.Logf("sign-ins: %d answered 401 (wrong password), %d answered 429; %d webhooks answered 200 during the flood",
		statuses[http.StatusUnauthorized], statuses[http.StatusTooManyRequests], delivered.Load())
	if statuses[http.StatusUnauthorized] > maxChecked {
		t.Errorf("%d sign-ins answered as a wrong password, want at most %d", statuses[http.StatusUnauthorized], maxChecked)
	}
	if got := statuses[http.StatusUnauthorized] + statuses[http.StatusTooManyRequests]; got != flood {
		t.Errorf("answers %v: want every one of the %d either 401 or 429", statuses, flood)
	}
	if noRetryHint > 0 {
		t.Errorf("%d of the 429s had no Retry-After", noRetryHint)
	}

	peak := queuetest.ProcessPeakRSSMB(t, h.pid)
	t.Logf("hookd's peak resident set: %.1f MiB", peak)
	if peak >= rssLimitMB {
		t.Errorf("hookd's peak resident set was %.1f MiB, want under %d MiB", peak, rssLimitMB)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return " (" + err.Error() + ")"
}
