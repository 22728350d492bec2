package web_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/store/activity"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/internal/telemetry"
	"github.com/hookd/hookd/web"
	"github.com/hookd/hookd/worker/maintenance"
)

// The "is STRIPE_WEBHOOK_SECRET right?" alert counts only deliveries whose
// signature header is well formed and recent but matches no secret: 1,000
// posts from strangers, unsigned or with a garbage header, count nothing
// toward it, and 20 signed with a wrong secret count 20, the alert's burst.
func TestSignatureAlert_CountsOnlyWrongSecrets(t *testing.T) {
	t.Parallel()
	bundle := setup(t, withoutServer())
	act := telemetry.NewActivity(activity.New(bundle.pool), discardLogger, telemetry.ActivityConfig{FlushInterval: time.Hour})
	metrics := telemetry.NewMetrics(prometheus.NewRegistry(), act)
	receiver := receiver.New(bundle.store, discardLogger, receiver.Config{Secrets: []string{testSecret}, Metrics: metrics})
	srv := httptest.NewServer(web.NewServer(web.Options{Logger: discardLogger, Stores: web.Stores{Queue: bundle.store},
		Receiver: receiver, Metrics: metrics, Gatherer: prometheus.NewRegistry(), MaxBody: 1 << 20}))
	t.Cleanup(srv.Close)
	ctx, stop := context.WithCancel(context.Background())
	flushed := make(chan struct{})
	go func() { defer close(flushed); _ = act.Run(ctx) }()

	send := func(sig string) int {
		body := stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/stripe", bytes.NewReader(body))
		if sig != "" {
			req.Header.Set("Stripe-Signature", sig)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	stale := stripeevent.Sign([]byte("{}"), testSecret, time.Now().Add(-time.Hour))
	garbage := []string{"", "t=abc,v1=zz", "garbage", "v1=" + string(bytes.Repeat([]byte("a"), 64)), stale}
	for i := range 1000 {
		if got := send(garbage[i%len(garbage)]); got != http.StatusBadRequest {
			t.Fatalf("garbage post %d: got %d, want 400", i, got)
		}
	}
	for range maintenance.SignatureBurst {
		body := stripeevent.Minimal(stripeevent.NewID("evt"), "invoice.paid")
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/stripe", bytes.NewReader(body))
		req.Header.Set("Stripe-Signature", stripeevent.Sign(body, "whsec_some_other_endpoints_secret", time.Now()))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("wrong secret: got %d, want 400", resp.StatusCode)
		}
	}
	// Stopping flushes the counts.
	stop()
	<-flushed
	n, err := activity.New(bundle.pool).SignatureFailures(t.Context(), maintenance.SignatureWindow)
	if err != nil {
		t.Fatal(err)
	}
	if n != maintenance.SignatureBurst {
		t.Errorf("signature failures counted toward the alert: %d, want the %d signed with a wrong secret", n, maintenance.SignatureBurst)
	}
}
