package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/queue/queuetest"
)

const testSecret = "whsec_main_test"

// freeAddr returns a local address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// syncBuffer is a bytes.Buffer safe to write from the program's goroutines
// while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServe runs `hookd serve` with env on its own database and port,
// waits until /readyz answers 200, and returns the base URL and a stop
// function that cancels the context and returns run's error.
func startServe(t *testing.T, env map[string]string) (string, func() error, *syncBuffer) {
	t.Helper()
	addr := freeAddr(t)
	env["DATABASE_URL"] = queuetest.NewDatabaseURL(t)
	env["HOOKD_ADDR"] = addr
	getenv := func(k string) string { return env[k] }

	ctx, cancel := context.WithCancel(t.Context())
	stderr := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve"}, getenv, strings.NewReader(""), io.Discard, stderr) }()
	stop := func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			return fmt.Errorf("run did not return after cancel")
		}
	}
	base := "http://" + addr
	queuetest.WaitFor(t, 10*time.Second, "/readyz to answer 200", func() bool {
		select {
		case err := <-done:
			t.Fatalf("run returned early: %v\n%s", err, stderr)
		default:
		}
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return base, stop, stderr
}

func TestRunServeStartsAndShutsDownCleanly(t *testing.T) {
	t.Parallel()
	base, stop, stderr := startServe(t, map[string]string{
		"STRIPE_WEBHOOK_SECRET": testSecret,
		"HOOKD_RETRY_INTERVAL":  "50ms",
	})

	var out bytes.Buffer
	err := run(t.Context(), []string{"send-test-event", "-url", base + "/webhooks/stripe", "-type", "charge.refunded"},
		func(k string) string { return map[string]string{"STRIPE_WEBHOOK_SECRET": testSecret}[k] },
		strings.NewReader(""), &out, io.Discard)
	if err != nil || !strings.Contains(out.String(), "200 OK: processed") {
		t.Errorf("send-test-event: got %v, output %q; want 200 processed", err, out.String())
	}

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`hookd_webhooks_received_total{outcome="processed"} 1`, "hookd_queue_events", "go_goroutines"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	if err := stop(); err != nil {
		t.Fatalf("run after cancel: got %v, want nil\n%s", err, stderr)
	}
	logs := stderr.String()
	for _, want := range []string{"no HOOKD_FORWARD_URL configured", "retry loop stopped", "stopped"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, testSecret) {
		t.Errorf("log contains the signing secret:\n%s", logs)
	}
}

func TestRunServeWithoutSecretAnswers503AndSaysWhy(t *testing.T) {
	t.Parallel()
	base, stop, stderr := startServe(t, map[string]string{})
	resp, err := http.Post(base+"/webhooks/stripe", "application/json", strings.NewReader(`{"id":"evt_1","type":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("got %d, want 503", resp.StatusCode)
	}
	if err := stop(); err != nil {
		t.Fatalf("run after cancel: got %v, want nil", err)
	}
	if !strings.Contains(stderr.String(), "no STRIPE_WEBHOOK_SECRET configured") {
		t.Errorf("log does not say why:\n%s", stderr)
	}
}

func TestParseConfigRetrySettings(t *testing.T) {
	t.Parallel()
	env := map[string]string{"HOOKD_RETRY_BATCH": "250"}
	cfg, err := parseConfig("serve", []string{"-retry-concurrency", "8"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil || cfg.RetryBatch != 250 || cfg.RetryConcurrency != 8 {
		t.Errorf("got batch %d, concurrency %d, %v; want 250, 8", cfg.RetryBatch, cfg.RetryConcurrency, err)
	}
	for _, bad := range []string{"0", "1001"} {
		env["HOOKD_RETRY_BATCH"] = bad
		if _, err := parseConfig("serve", nil, func(k string) string { return env[k] }, io.Discard); err == nil ||
			!strings.Contains(err.Error(), "HOOKD_RETRY_BATCH") {
			t.Errorf("batch %s: got %v, want an error naming HOOKD_RETRY_BATCH", bad, err)
		}
	}
}
