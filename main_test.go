package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/queue/queuetest"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestParseConfig_Defaults(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig("serve", nil, envOf(nil), new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != ":8080" || cfg.ForwardTimeout != 10*time.Second || cfg.RetryInterval != 5*time.Second ||
		cfg.MarkerRetention != 720*time.Hour || cfg.MaxBody != 1<<20 || len(cfg.StripeSecrets) != 0 {
		t.Fatalf("defaults = %+v, want SPEC.md's", cfg)
	}
}

func TestParseConfig_FlagOverridesEnvironment(t *testing.T) {
	t.Parallel()
	env := envOf(map[string]string{
		"HOOKD_RETRY_INTERVAL":  "2s",
		"HOOKD_ADDR":            ":9000",
		"STRIPE_WEBHOOK_SECRET": "whsec_old, whsec_new",
	})
	cfg, err := parseConfig("serve", []string{"-retry-interval", "750ms"}, env, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RetryInterval != 750*time.Millisecond {
		t.Errorf("retry interval = %v, want the flag's 750ms", cfg.RetryInterval)
	}
	if cfg.Addr != ":9000" {
		t.Errorf("addr = %q, want the environment's :9000", cfg.Addr)
	}
	if len(cfg.StripeSecrets) != 2 || cfg.StripeSecrets[1].Reveal() != "whsec_new" {
		t.Errorf("secrets = %d, want both rolled secrets", len(cfg.StripeSecrets))
	}
}

func TestParseConfig_BadValueNamesTheVariable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"UnparseableDuration", map[string]string{"HOOKD_RETRY_INTERVAL": "5"}, nil, `HOOKD_RETRY_INTERVAL: not a duration like 10s, 5m or 720h (got "5")`},
		{"NegativeDuration", map[string]string{"HOOKD_FORWARD_TIMEOUT": "-1s"}, nil, "HOOKD_FORWARD_TIMEOUT: must be greater than zero"},
		{"BadURL", map[string]string{"HOOKD_FORWARD_URL": "localhost:3000/hooks"}, nil, "HOOKD_FORWARD_URL: not an absolute http(s) URL"},
		{"BadBodyLimit", map[string]string{"HOOKD_MAX_BODY": "1MB"}, nil, "HOOKD_MAX_BODY: not a whole number"},
		{"BadFlag", nil, []string{"-marker-retention", "30d"}, "-marker-retention: not a duration"},
		{"BadStripeSecret", map[string]string{"STRIPE_WEBHOOK_SECRET": "sk_live_oops"}, nil, "STRIPE_WEBHOOK_SECRET: each secret must start with whsec_"},
		{"BadForwardSecret", map[string]string{"HOOKD_FORWARD_SECRET": "whsec_!!!"}, nil, "HOOKD_FORWARD_SECRET: the part after whsec_ is not valid base64"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseConfig("serve", tc.args, envOf(tc.env), new(bytes.Buffer))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("err spans lines: %q", err)
			}
		})
	}
}

func TestParseConfig_SecretsStayOutOfErrorsAndHelp(t *testing.T) {
	t.Parallel()
	_, err := parseConfig("serve", nil, envOf(map[string]string{"STRIPE_WEBHOOK_SECRET": "topsecret"}), new(bytes.Buffer))
	if err == nil || strings.Contains(err.Error(), "topsecret") {
		t.Fatalf("err = %v: want an error that does not repeat the secret", err)
	}
	var help bytes.Buffer
	_, err = parseConfig("serve", []string{"-h"}, envOf(map[string]string{"HOOKD_ADMIN_PASSWORD": "hunter2"}), &help)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: err = %v, want flag.ErrHelp", err)
	}
	if strings.Contains(help.String(), "hunter2") {
		t.Fatal("-h output shows a secret from the environment")
	}
	for _, s := range settings {
		if !strings.Contains(help.String(), "$"+s.env) {
			t.Errorf("-h does not list %s", s.env)
		}
	}
}

func TestRun_MigrateTwiceIsANoop(t *testing.T) {
	t.Parallel()
	// A database with the helper's schema dropped, as a first install sees it.
	pool := queuetest.NewPool(t)
	if _, err := pool.Exec(t.Context(), `DROP SCHEMA public CASCADE; CREATE SCHEMA public`); err != nil {
		t.Fatal(err)
	}
	env := envOf(map[string]string{"DATABASE_URL": pool.Config().ConnString()})

	var out bytes.Buffer
	if err := run(context.Background(), []string{"migrate"}, env, nil, &out, &out); err != nil {
		t.Fatalf("first migrate: %v", err)
	}
	if !strings.Contains(out.String(), "applied 00001_webhook_queue.sql") {
		t.Fatalf("first migrate printed %q, want the migrations it applied", out.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"migrate"}, env, nil, &out, &out); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if strings.TrimSpace(out.String()) != "migrate: schema is up to date" {
		t.Fatalf("second migrate printed %q, want nothing applied", out.String())
	}
}

func TestRun_UnreachableDatabaseIsOneLine(t *testing.T) {
	t.Parallel()
	env := envOf(map[string]string{"DATABASE_URL": "postgres://nobody:x@127.0.0.1:1/none?connect_timeout=2"})
	err := run(context.Background(), []string{"migrate"}, env, nil, new(bytes.Buffer), new(bytes.Buffer))
	if err == nil || !strings.Contains(err.Error(), "connect to database at 127.0.0.1:1/none as nobody") {
		t.Fatalf("err = %v, want a connection error naming the database", err)
	}
	if strings.Contains(err.Error(), "x@") {
		t.Fatalf("err = %v shows the password", err)
	}
}
