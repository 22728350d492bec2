package stripeapi_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/stripeapi"
)

// stripeMockVersion is the stripe-mock these tests were written against:
// go install github.com/stripe/stripe-mock@v0.203.0
const stripeMockVersion = "v0.203.0"

// startStripeMock runs stripe-mock, Stripe's own mock of its API, which
// checks every request against Stripe's OpenAPI spec, and returns its URL.
// Without the binary the test is skipped, saying how to install it, except
// with CI=true, where it fails.
func startStripeMock(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("stripe-mock")
	if err != nil {
		if gopath, gerr := exec.Command("go", "env", "GOPATH").Output(); gerr == nil {
			candidate := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "stripe-mock")
			if _, serr := os.Stat(candidate); serr == nil {
				bin, err = candidate, nil
			}
		}
	}
	if err != nil {
		msg := "stripe-mock is not installed: go install github.com/stripe/stripe-mock@" + stripeMockVersion
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("start stripe-mock: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		listening := regexp.MustCompile(`Listening for HTTP at address: (\S+)`)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatal("stripe-mock did not say where it listens within 30 s")
		return ""
	}
}

// TestV1CallsPassStripeMock makes every v1 request hookd makes against
// stripe-mock, which refuses any path, parameter or header Stripe's
// OpenAPI spec does not have.
func TestV1CallsPassStripeMock(t *testing.T) {
	t.Parallel()
	url := startStripeMock(t)
	c := stripeapi.New(stripeapi.Config{Key: "sk_test_123", URL: url, PagePause: -1, MaxNetworkRetries: 1})
	ctx := t.Context()

	if _, err := c.Endpoint(ctx, "we_123"); err != nil {
		t.Errorf("GET /v1/webhook_endpoints/{id}: %v", err)
	}
	for _, account := range []string{"", "acct_123"} {
		if _, err := c.AccountEvent(ctx, account, "evt_123"); err != nil {
			t.Errorf("GET /v1/events/{id} with Stripe-Account %q: %v", account, err)
		}
	}
	for _, account := range []string{"", "acct_123"} {
		n := 0
		err := c.AccountEvents(ctx, account, time.Now().Add(-72*time.Hour), func(page []stripeapi.Event) error {
			n += len(page)
			return nil
		})
		if err != nil || n == 0 {
			t.Errorf("GET /v1/events with Stripe-Account %q: %d events, %v", account, n, err)
		}
	}
	for _, ref := range []stripeapi.ObjectRef{
		{Type: "invoice", ID: "in_123"},
		{Type: "customer", ID: "cus_123"},
		{Type: "subscription", ID: "sub_123"},
		{Type: "payment_intent", ID: "pi_123"},
		{Type: "charge", ID: "ch_123", Account: "acct_123"},
		{Type: "refund", ID: "re_123"},
		{Type: "checkout.session", ID: "cs_123"},
		{URL: "/v1/invoices/in_123"},
	} {
		raw, err := c.Object(ctx, ref)
		if err != nil || !strings.Contains(string(raw), `"object"`) {
			t.Errorf("GET %s: %.100s, %v", ref, raw, err)
		}
	}
}
