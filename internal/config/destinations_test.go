package config

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/hookd/hookd/internal/destinations"
)

// TestParseConfig_Destinations: HOOKD_DESTINATIONS_FILE's destinations,
// read with the environment, or HOOKD_FORWARD_URL's one, default; both is
// one clear error, a bad file the one line Load says, and a destination
// naming an endpoint hookd does not serve is refused.
func TestParseConfig_Destinations(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	files := map[string]string{
		good: "destinations:\n  - name: billing\n    url: https://billing.internal/stripe\n    endpoints: [connect]\n" +
			"    headers_env: {Authorization: BILLING_AUTH}\n  - name: crm\n    url: https://crm.internal\n",
		bad: "destinations:\n  - name: crm\n    url: ftp://crm.internal\n",
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	cfg, err := Parse("serve", nil, envOf(nil), new(bytes.Buffer))
	if err != nil || cfg.Destinations != nil || cfg.DestinationsFile != "" {
		t.Errorf("neither set: %v, %+v", err, cfg.Destinations)
	}

	cfg, err = Parse("serve", nil, envOf(map[string]string{"HOOKD_FORWARD_URL": "https://app.example/hook"}), new(bytes.Buffer))
	if err != nil || cfg.ForwardURL != "https://app.example/hook" || cfg.Destinations == nil ||
		cfg.Destinations.Hash != destinations.Single("https://app.example/hook").Hash {
		t.Errorf("HOOKD_FORWARD_URL alone: %v, %+v", err, cfg.Destinations)
	}

	env := map[string]string{"HOOKD_DESTINATIONS_FILE": good, "BILLING_AUTH": "Bearer b",
		"STRIPE_WEBHOOK_SECRETS": "default=whsec_a;connect=whsec_b"}
	cfg, err = Parse("serve", nil, envOf(env), new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if set := cfg.Destinations; set.Source != destinations.SourceFile || len(set.Destinations) != 2 ||
		set.Get("billing").Headers.Get("Authorization") != "Bearer b" || cfg.ForwardURL != "" || cfg.DestinationsFile != good {
		t.Errorf("the file: %+v", set)
	}

	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"both set", map[string]string{"HOOKD_DESTINATIONS_FILE": good, "BILLING_AUTH": "x", "HOOKD_FORWARD_URL": "https://app.example"}, nil,
			"HOOKD_DESTINATIONS_FILE and HOOKD_FORWARD_URL are both set: the file names every destination, HOOKD_FORWARD_URL " +
				"the one destination default; unset one (to keep the URL, make it a destination of the file)"},
		{"both set, the URL by flag", map[string]string{"HOOKD_DESTINATIONS_FILE": good, "BILLING_AUTH": "x"}, []string{"-forward-url", "https://app.example"},
			"HOOKD_DESTINATIONS_FILE and HOOKD_FORWARD_URL are both set: the file names every destination, HOOKD_FORWARD_URL " +
				"the one destination default; unset one (to keep the URL, make it a destination of the file)"},
		{"a bad file", map[string]string{"HOOKD_DESTINATIONS_FILE": bad}, nil,
			"HOOKD_DESTINATIONS_FILE: " + bad + `: destination "crm": url: "ftp://crm.internal" is not http or https`},
		{"its variable empty", map[string]string{"HOOKD_DESTINATIONS_FILE": good}, nil,
			"HOOKD_DESTINATIONS_FILE: " + good + `: destination "billing": headers_env: Authorization: BILLING_AUTH is empty`},
		{"an endpoint not served", map[string]string{"HOOKD_DESTINATIONS_FILE": good, "BILLING_AUTH": "x", "STRIPE_WEBHOOK_SECRET": "whsec_a"}, nil,
			"HOOKD_DESTINATIONS_FILE: " + good + `: destination "billing": endpoints: "connect" is no endpoint's label (hookd serves default)`},
		{"no such file", map[string]string{"HOOKD_DESTINATIONS_FILE": good + ".gone"}, nil,
			"HOOKD_DESTINATIONS_FILE: " + good + ".gone: no such file or directory"},
	} {
		_, err := Parse("serve", tc.args, envOf(tc.env), new(bytes.Buffer))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v\nwant %s", tc.name, err, tc.want)
		}
	}
}
