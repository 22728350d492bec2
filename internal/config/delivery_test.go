package config

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestParseConfig_DeliveryControl(t *testing.T) {
	t.Parallel()
	cfg, err := Parse("serve", nil, envOf(nil), new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BreakerFailures != 20 || cfg.BreakerProbe != 30*time.Second || cfg.ForwardRate != 0 {
		t.Fatalf("defaults: breaker %d, probe %s, rate %g; want 20, 30s, unlimited", cfg.BreakerFailures, cfg.BreakerProbe, cfg.ForwardRate)
	}
	cfg, err = Parse("serve", []string{"-forward-rate", "0.5"}, envOf(map[string]string{
		"HOOKD_BREAKER_FAILURES": "5", "HOOKD_BREAKER_PROBE": "5m", "HOOKD_FORWARD_RATE": "unlimited"}), new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BreakerFailures != 5 || cfg.BreakerProbe != 5*time.Minute || cfg.ForwardRate != 0.5 {
		t.Fatalf("set: breaker %d, probe %s, rate %g", cfg.BreakerFailures, cfg.BreakerProbe, cfg.ForwardRate)
	}
	for env, want := range map[string]string{
		"HOOKD_BREAKER_FAILURES=0": "HOOKD_BREAKER_FAILURES: must be greater than zero",
		"HOOKD_BREAKER_PROBE=6m":   "HOOKD_BREAKER_PROBE: at most 5m",
		"HOOKD_FORWARD_RATE=0":     "HOOKD_FORWARD_RATE: not a number of deliveries a second greater than zero",
		"HOOKD_FORWARD_RATE=fast":  `HOOKD_FORWARD_RATE: not a number of deliveries a second greater than zero, like 50 or 0.5, or unlimited (got "fast")`,
	} {
		k, v, _ := strings.Cut(env, "=")
		_, err := Parse("serve", nil, envOf(map[string]string{k: v}), new(bytes.Buffer))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", env, err, want)
		}
	}
}

// TestParseConfig_RatesRefuseNaNInfAndNegatives: every rate setting goes
// through one parser, which names the variable and refuses what is not a
// finite rate above zero (NaN passed a check written as f <= 0 || f > max).
func TestParseConfig_RatesRefuseNaNInfAndNegatives(t *testing.T) {
	t.Parallel()
	for _, env := range []string{"HOOKD_FORWARD_RATE", "HOOKD_STRIPE_API_RATE"} {
		for _, v := range []string{"NaN", "nan", "Inf", "+Inf", "-Inf", "-1", "-0.5", "0", "1e400"} {
			_, err := Parse("serve", nil, envOf(map[string]string{env: v}), new(bytes.Buffer))
			if err == nil || !strings.HasPrefix(err.Error(), env+": ") {
				t.Errorf("%s=%s: error %v, want one naming %s", env, v, err, env)
			}
		}
	}
}
