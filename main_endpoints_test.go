package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/hookd/hookd/internal/config"
	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/receiver"
)

func TestParseConfig_Endpoints(t *testing.T) {
	t.Parallel()
	t.Run("OneSecretIsTheDefaultEndpoint", func(t *testing.T) {
		t.Parallel()
		cfg, err := config.Parse("serve", nil, envOf(map[string]string{
			"STRIPE_WEBHOOK_SECRET": "whsec_a,whsec_b", "HOOKD_TEST_EVENTS": "discard",
		}), new(bytes.Buffer))
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.Endpoints) != 1 {
			t.Fatalf("endpoints: %v", cfg.Endpoints)
		}
		e := cfg.Endpoints[0]
		if e.Label != endpoint.DefaultLabel || len(e.Secrets) != 2 || e.TestEvents != endpoint.DiscardTestEvents {
			t.Errorf("endpoint = %v", e)
		}
		if cfg.SnapshotAlias != receiver.ForwardBoth {
			t.Errorf("HOOKD_SNAPSHOT_ALIAS defaults to %q, want forward-both", cfg.SnapshotAlias)
		}
	})
	t.Run("AStripeIDInHookdEndpointsIsEnoughForReconciliation", func(t *testing.T) {
		t.Parallel()
		env := map[string]string{
			"STRIPE_WEBHOOK_SECRETS": "account=whsec_a;thin=whsec_c",
			"STRIPE_API_KEY":         "rk_test_" + strings.Repeat("x", 24),
		}
		if _, err := config.Parse("serve", nil, envOf(env), new(bytes.Buffer)); err == nil ||
			!strings.Contains(err.Error(), "STRIPE_WEBHOOK_ENDPOINT_ID: required with STRIPE_API_KEY, or a stripe_id") {
			t.Errorf("no endpoint with a Stripe id: got %v", err)
		}
		env["HOOKD_ENDPOINTS"] = "thin:kind=thin,stripe_id=ed_1"
		if _, err := config.Parse("serve", nil, envOf(env), new(bytes.Buffer)); err != nil {
			t.Errorf("a stripe_id in HOOKD_ENDPOINTS: %v", err)
		}
	})
	t.Run("LabelledEndpointsWithTheirSettings", func(t *testing.T) {
		t.Parallel()
		cfg, err := config.Parse("serve", nil, envOf(map[string]string{
			"STRIPE_WEBHOOK_SECRETS": "account=whsec_a;connect=whsec_b;thin=whsec_c",
			"HOOKD_ENDPOINTS":        "connect:connect=true,test_events=queue-only;thin:kind=thin,stripe_id=ed_1",
			"HOOKD_TEST_EVENTS":      "discard",
			"HOOKD_SNAPSHOT_ALIAS":   "dedup",
		}), new(bytes.Buffer))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]endpoint.Endpoint{}
		for _, e := range cfg.Endpoints {
			got[e.Label] = e
		}
		if e := got["account"]; e.TestEvents != endpoint.DiscardTestEvents || e.Kind != endpoint.Snapshot {
			t.Errorf("account = %v", e)
		}
		if e := got["connect"]; !e.Connect || e.TestEvents != endpoint.QueueTestEvents {
			t.Errorf("connect = %v", e)
		}
		if e := got["thin"]; e.Kind != endpoint.Thin || e.StripeID != "ed_1" {
			t.Errorf("thin = %v", e)
		}
		if cfg.SnapshotAlias != receiver.DedupAlias {
			t.Errorf("SnapshotAlias = %q", cfg.SnapshotAlias)
		}
		// Printed or logged, the endpoints show no secret.
		var log bytes.Buffer
		slog.New(slog.NewTextHandler(&log, nil)).Info("config", "endpoints", cfg.Endpoints, "endpoint", cfg.Endpoints[0])
		for _, out := range []string{fmt.Sprintf("%v %+v", cfg, cfg.Endpoints), log.String()} {
			if strings.Contains(out, "whsec_") {
				t.Errorf("a secret shows in %q", out)
			}
		}
	})
	for _, tc := range []struct {
		name string
		env  map[string]string
		says string
	}{
		{"BothForms", map[string]string{"STRIPE_WEBHOOK_SECRET": "whsec_a", "STRIPE_WEBHOOK_SECRETS": "x=whsec_b"},
			"STRIPE_WEBHOOK_SECRET and STRIPE_WEBHOOK_SECRETS are both set"},
		{"SettingsWithoutEndpoints", map[string]string{"HOOKD_ENDPOINTS": "x:kind=thin"}, "HOOKD_ENDPOINTS: no endpoint"},
		// It would otherwise be ignored: reconciliation reads the
		// labelled endpoints' stripe_id.
		{"EndpointIDWithLabels", map[string]string{"STRIPE_WEBHOOK_SECRETS": "x=whsec_b", "STRIPE_WEBHOOK_ENDPOINT_ID": "we_1",
			"STRIPE_API_KEY": "rk_test_abc"}, "STRIPE_WEBHOOK_ENDPOINT_ID goes with STRIPE_WEBHOOK_SECRET: with STRIPE_WEBHOOK_SECRETS"},
		{"UnknownLabel", map[string]string{"STRIPE_WEBHOOK_SECRETS": "x=whsec_b", "HOOKD_ENDPOINTS": "y:kind=thin"},
			`HOOKD_ENDPOINTS: endpoint "y" has no secret`},
		{"BadSecret", map[string]string{"STRIPE_WEBHOOK_SECRETS": "x=whsec_b;y=sk_live_secretvalue"}, "STRIPE_WEBHOOK_SECRETS"},
		{"BadTestEvents", map[string]string{"HOOKD_TEST_EVENTS": "keep"}, "HOOKD_TEST_EVENTS"},
		{"BadAlias", map[string]string{"HOOKD_SNAPSHOT_ALIAS": "merge"}, "HOOKD_SNAPSHOT_ALIAS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := config.Parse("serve", nil, envOf(tc.env), new(bytes.Buffer))
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err = %v, want one saying %q", err, tc.says)
			}
			if strings.Contains(err.Error(), "whsec_b") || strings.Contains(err.Error(), "secretvalue") {
				t.Errorf("the error %q shows a secret", err)
			}
		})
	}
}
