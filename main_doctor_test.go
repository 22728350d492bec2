package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookd/hookd/internal/stripeapi/stripetest"
)

// hookd doctor reads the configuration hookd serve reads, prints a line per
// check, and exits non-zero only when one fails.
func TestRunDoctor(t *testing.T) {
	t.Parallel()
	status := http.StatusOK
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }))
	t.Cleanup(app.Close)
	stripe := stripetest.NewServer(t)
	endpoint := stripe.AddEndpoint(stripetest.Endpoint{APIVersion: "2025-03-31.basil"})
	env := map[string]string{
		"DATABASE_URL":               setup(t).dbURL,
		"HOOKD_ADMIN_EMAIL":          "ops@example.com",
		"HOOKD_ADMIN_PASSWORD":       "correct horse battery",
		"STRIPE_WEBHOOK_SECRET":      "whsec_" + strings.Repeat("Ab1", 11),
		"HOOKD_FORWARD_URL":          app.URL + "/stripe-events",
		"HOOKD_FORWARD_SECRET":       "whsec_ZG9jdG9yLW1haW4tdGVzdA==",
		"HOOKD_STRIPE_API_URL":       stripe.URL,
		"STRIPE_API_KEY":             stripe.Key(),
		"STRIPE_WEBHOOK_ENDPOINT_ID": endpoint.ID,
	}
	doctor := func() (string, error) {
		var out bytes.Buffer
		err := run(t.Context(), []string{"doctor"}, func(k string) string { return env[k] }, strings.NewReader(""), &out, io.Discard)
		return out.String(), err
	}

	out, err := doctor()
	if err != nil {
		t.Fatalf("doctor on a good configuration: %v\n%s", err, out)
	}
	// The check column is as wide as the longest check's name: the
	// output is read with each run of spaces as one.
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"ok database", "ok session timeouts", "ok signing secret", "ok forward to app", "ok clock",
		"ok stripe api key", "ok stripe endpoint " + endpoint.ID + " is enabled", "API version 2025-03-31.basil",
		"ok metrics served on 127.0.0.1:9090/metrics only, not on HOOKD_ADDR", "0 failed"} {
		if !strings.Contains(flat, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	status = http.StatusInternalServerError
	out, err = doctor()
	if err == nil || !strings.Contains(err.Error(), "1 of") || !strings.Contains(out, "fail  forward to app") {
		t.Errorf("doctor with an app answering 500: %v\n%s\nwant the forward check to fail and a non-nil error", err, out)
	}
}
