package config

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestParseConfig_Defaults(t *testing.T) {
	t.Parallel()
	cfg, err := Parse("serve", nil, envOf(nil), new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != ":8080" || cfg.ForwardTimeout != 10*time.Second || cfg.RetryInterval != 5*time.Second ||
		cfg.MarkerRetention != 720*time.Hour || cfg.MaxBody != 1<<20 || cfg.MaxBodyMemory != 32<<20 || len(cfg.StripeSecrets) != 0 ||
		cfg.Processor != "forward" ||
		cfg.AlertURL != "" || cfg.AlertPendingAge != time.Hour || cfg.PublicURL != "" ||
		cfg.MetricsAddr != "127.0.0.1:9090" || cfg.MetricsPublic ||
		cfg.DashboardConns != 4 || cfg.DashboardTimeout != 5*time.Second {
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
	cfg, err := Parse("serve", []string{"-retry-interval", "750ms"}, env, new(bytes.Buffer))
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

func TestParseConfig_BooleanFlagNeedsNoValue(t *testing.T) {
	t.Parallel()
	env := envOf(map[string]string{"HOOKD_SECURE_COOKIES": "false"})
	cfg, err := Parse("serve", []string{"-secure-cookies", "-addr", ":9001"}, env, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.SecureCookies || cfg.Addr != ":9001" {
		t.Fatalf("secure cookies %v, addr %q; want the bare flag to mean true and the next flag kept", cfg.SecureCookies, cfg.Addr)
	}
	cfg, err = Parse("serve", nil, envOf(map[string]string{"HOOKD_SECURE_COOKIES": "true"}), new(bytes.Buffer))
	if err != nil || !cfg.SecureCookies {
		t.Fatalf("HOOKD_SECURE_COOKIES=true gave %v, %v", cfg.SecureCookies, err)
	}
}

// Behind an https public URL the session cookie is Secure by default; an
// explicit HOOKD_SECURE_COOKIES wins either way.
func TestParseConfig_SecureCookiesFollowAnHTTPSPublicURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want bool
	}{
		{map[string]string{"HOOKD_PUBLIC_URL": "https://hookd.example.com"}, nil, true},
		{map[string]string{"HOOKD_PUBLIC_URL": "HTTPS://hookd.example.com"}, nil, true},
		{map[string]string{"HOOKD_PUBLIC_URL": "http://localhost:8080"}, nil, false},
		{map[string]string{}, nil, false},
		{map[string]string{"HOOKD_PUBLIC_URL": "https://hookd.example.com", "HOOKD_SECURE_COOKIES": "false"}, nil, false},
		{map[string]string{"HOOKD_PUBLIC_URL": "https://hookd.example.com"}, []string{"-secure-cookies=false"}, false},
		{map[string]string{"HOOKD_PUBLIC_URL": "http://localhost:8080", "HOOKD_SECURE_COOKIES": "true"}, nil, true},
	} {
		cfg, err := Parse("serve", tc.args, envOf(tc.env), new(bytes.Buffer))
		if err != nil || cfg.SecureCookies != tc.want {
			t.Errorf("%v %v: secure cookies %v, %v; want %v", tc.env, tc.args, cfg.SecureCookies, err, tc.want)
		}
	}
}

func TestParseConfig_TrustedProxies(t *testing.T) {
	t.Parallel()
	cfg, err := Parse("serve", nil, envOf(map[string]string{"HOOKD_TRUSTED_PROXIES": "127.0.0.1, 10.0.0.0/8,::1"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range cfg.TrustedProxies {
		got = append(got, n.String())
	}
	if want := "127.0.0.1/32 10.0.0.0/8 ::1/128"; strings.Join(got, " ") != want {
		t.Errorf("trusted proxies %v, want %s", got, want)
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
		{"BodyMemoryBelowDefaultBodyLimit", map[string]string{"HOOKD_MAX_BODY_MEMORY": "1048575"}, nil,
			"HOOKD_MAX_BODY_MEMORY: must be at least HOOKD_MAX_BODY (1048576), or a body of that size could never be read (got 1048575)"},
		{"BodyMemoryBelowBodyLimit", map[string]string{"HOOKD_MAX_BODY": "4194304"}, []string{"-max-body-memory", "2097152"},
			"HOOKD_MAX_BODY_MEMORY: must be at least HOOKD_MAX_BODY (4194304)"},
		{"BadFlag", nil, []string{"-marker-retention", "30d"}, "-marker-retention: not a duration"},
		{"BadStripeSecret", map[string]string{"STRIPE_WEBHOOK_SECRET": "sk_live_oops"}, nil, "STRIPE_WEBHOOK_SECRET: each secret must start with whsec_"},
		{"ForwardTimeoutBeyondItsLimit", map[string]string{"HOOKD_FORWARD_TIMEOUT": "5m"}, nil, "HOOKD_FORWARD_TIMEOUT: must be shorter than 2m0s, or a replica that dies mid-retry keeps its events waiting"},
		{"RetentionBelowStripesRedeliveryWindow", map[string]string{"HOOKD_MARKER_RETENTION": "71h"}, nil,
			`HOOKD_MARKER_RETENTION: must be at least 72h: Stripe redelivers an event for up to 3 days`},
		{"RetentionFlagBelowStripesRedeliveryWindow", nil, []string{"-marker-retention", "24h"}, "-marker-retention: must be at least 72h"},
		{"ZeroInlineConcurrency", map[string]string{"HOOKD_INLINE_CONCURRENCY": "0"}, nil, "HOOKD_INLINE_CONCURRENCY: must be greater than zero"},
		{"UnknownProcessor", map[string]string{"HOOKD_PROCESSOR": "drop"}, nil, `HOOKD_PROCESSOR: must be forward or discard (got "drop")`},
		{"BadForwardSecret", map[string]string{"HOOKD_FORWARD_SECRET": "whsec_!!!"}, nil, "HOOKD_FORWARD_SECRET: the part after whsec_ is not valid base64"},
		{"BadTrustedProxy", map[string]string{"HOOKD_TRUSTED_PROXIES": "10.0.0.0/8, nginx"}, nil, `HOOKD_TRUSTED_PROXIES: "nginx" is not a CIDR`},
		{"BadAlertURL", map[string]string{"HOOKD_ALERT_URL": "hooks.slack.com/services/T0/B0/x"}, nil, "HOOKD_ALERT_URL: not an absolute http(s) URL"},
		{"ZeroPendingAge", map[string]string{"HOOKD_ALERT_PENDING_AGE": "0s"}, nil, "HOOKD_ALERT_PENDING_AGE: must be greater than zero"},
		{"BadPublicURL", map[string]string{"HOOKD_PUBLIC_URL": "/hookd"}, nil, "HOOKD_PUBLIC_URL: not an absolute http(s) URL"},
		{"ZeroDashboardConns", map[string]string{"HOOKD_DASHBOARD_CONNS": "0"}, nil, "HOOKD_DASHBOARD_CONNS: must be greater than zero"},
		{"TooManyDashboardConns", map[string]string{"HOOKD_DASHBOARD_CONNS": "101"}, nil, "HOOKD_DASHBOARD_CONNS: at most 100"},
		{"NoDashboardTimeout", map[string]string{"HOOKD_DASHBOARD_TIMEOUT": "0s"}, nil, "HOOKD_DASHBOARD_TIMEOUT: must be greater than zero"},
		{"SubMillisecondDashboardTimeout", map[string]string{"HOOKD_DASHBOARD_TIMEOUT": "500us"}, nil, "HOOKD_DASHBOARD_TIMEOUT: at least 1ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("serve", tc.args, envOf(tc.env), new(bytes.Buffer))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("err spans lines: %q", err)
			}
		})
	}
}

func TestParseConfig_RetentionOfStripesWindowIsAccepted(t *testing.T) {
	t.Parallel()
	cfg, err := Parse("serve", nil, envOf(map[string]string{"HOOKD_MARKER_RETENTION": "72h"}), new(bytes.Buffer))
	if err != nil || cfg.MarkerRetention != 72*time.Hour {
		t.Fatalf("72h: got %v, %v; want it accepted", cfg.MarkerRetention, err)
	}
}

func TestParseConfig_SecretsStayOutOfErrorsAndHelp(t *testing.T) {
	t.Parallel()
	_, err := Parse("serve", nil, envOf(map[string]string{"STRIPE_WEBHOOK_SECRET": "topsecret"}), new(bytes.Buffer))
	if err == nil || strings.Contains(err.Error(), "topsecret") {
		t.Fatalf("err = %v: want an error that does not repeat the secret", err)
	}
	// An incoming webhook's URL carries its token.
	_, err = Parse("serve", nil, envOf(map[string]string{"HOOKD_ALERT_URL": "hooks.example/T0/topsecret"}), new(bytes.Buffer))
	if err == nil || strings.Contains(err.Error(), "topsecret") {
		t.Fatalf("err = %v: want an error that does not repeat the alert URL", err)
	}
	var help bytes.Buffer
	_, err = Parse("serve", []string{"-h"}, envOf(map[string]string{"HOOKD_ADMIN_PASSWORD": "hunter2"}), &help)
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

func TestParseConfigRetrySettings(t *testing.T) {
	t.Parallel()
	env := map[string]string{"HOOKD_RETRY_BATCH": "250"}
	cfg, err := Parse("serve", []string{"-retry-concurrency", "8"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil || cfg.RetryBatch != 250 || cfg.RetryConcurrency != 8 {
		t.Errorf("got batch %d, concurrency %d, %v; want 250, 8", cfg.RetryBatch, cfg.RetryConcurrency, err)
	}
	for _, bad := range []string{"0", "1001"} {
		env["HOOKD_RETRY_BATCH"] = bad
		if _, err := Parse("serve", nil, func(k string) string { return env[k] }, io.Discard); err == nil ||
			!strings.Contains(err.Error(), "HOOKD_RETRY_BATCH") {
			t.Errorf("batch %s: got %v, want an error naming HOOKD_RETRY_BATCH", bad, err)
		}
	}
}

func TestParseConfig_MetricsAddr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ value, want string }{
		{"", "127.0.0.1:9090"}, {"off", ""}, {":9100", ":9100"}, {"10.0.0.5:9090", "10.0.0.5:9090"},
	} {
		cfg, err := Parse("serve", nil, envOf(map[string]string{"HOOKD_METRICS_ADDR": tc.value}), io.Discard)
		if err != nil || cfg.MetricsAddr != tc.want {
			t.Errorf("HOOKD_METRICS_ADDR=%q: %q, %v; want %q", tc.value, cfg.MetricsAddr, err, tc.want)
		}
	}
	_, err := Parse("serve", nil, envOf(map[string]string{"HOOKD_METRICS_ADDR": "9090"}), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "HOOKD_METRICS_ADDR") || !strings.Contains(err.Error(), "or off") {
		t.Errorf("HOOKD_METRICS_ADDR=9090: %v, want an error naming the variable and off", err)
	}
}
