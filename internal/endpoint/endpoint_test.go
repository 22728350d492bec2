package endpoint_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/endpoint"
)

func TestParseSecrets_LabelsEachEndpointWithItsSecrets(t *testing.T) {
	eps, err := endpoint.ParseSecrets(" account=whsec_a, whsec_a_old ; connect=whsec_b;thin=whsec_c;")
	if err != nil {
		t.Fatal(err)
	}
	want := []endpoint.Endpoint{
		{Label: "account", Secrets: []string{"whsec_a", "whsec_a_old"}, Kind: endpoint.Snapshot, TestEvents: endpoint.ForwardTestEvents, Undeclared: true},
		{Label: "connect", Secrets: []string{"whsec_b"}, Kind: endpoint.Snapshot, TestEvents: endpoint.ForwardTestEvents, Undeclared: true},
		{Label: "thin", Secrets: []string{"whsec_c"}, Kind: endpoint.Snapshot, TestEvents: endpoint.ForwardTestEvents, Undeclared: true},
	}
	if !reflect.DeepEqual(eps, want) {
		t.Fatalf("got %+v\nwant %+v", eps, want)
	}
}

func TestParseSecrets_RefusesWhatCannotDecideAnEndpoint(t *testing.T) {
	for _, tc := range []struct{ in, says string }{
		{"whsec_a", "label=whsec_"},
		{"Account=whsec_a", "lower-case"},
		{"a=whsec_a;a=whsec_b", "named twice"},
		{"a=whsec_a;b=whsec_a", "share a secret"},
		{"a=sk_live_x", "must start with whsec_"},
		{"a=", "has no secret"},
		{strings.Repeat("x", 33) + "=whsec_a", "1 to 32 characters"},
	} {
		_, err := endpoint.ParseSecrets(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("ParseSecrets(%q) = %v, want an error saying %q", tc.in, err, tc.says)
		}
		if err != nil && strings.Contains(err.Error(), "whsec_a_") {
			t.Errorf("ParseSecrets(%q): the error %q shows a secret", tc.in, err)
		}
	}
}

func TestConfigure_SetsEachEndpointsSettings(t *testing.T) {
	eps, err := endpoint.ParseSecrets("account=whsec_a;connect=whsec_b;thin=whsec_c")
	if err != nil {
		t.Fatal(err)
	}
	err = endpoint.Configure(eps, "connect:connect=true, test_events=discard, stripe_id=we_123; thin:kind=thin,stripe_id=ed_456,quiet=6h")
	if err != nil {
		t.Fatal(err)
	}
	if e := eps[0]; e.Kind != endpoint.Snapshot || e.Connect || e.StripeID != "" || e.TestEvents != endpoint.ForwardTestEvents || e.Quiet != 0 {
		t.Errorf("account = %+v, want the defaults", e)
	}
	if e := eps[1]; !e.Connect || e.TestEvents != endpoint.DiscardTestEvents || e.StripeID != "we_123" || e.Destination() {
		t.Errorf("connect = %+v", e)
	}
	if e := eps[2]; e.Kind != endpoint.Thin || e.StripeID != "ed_456" || !e.Destination() || e.Quiet != 6*time.Hour {
		t.Errorf("thin = %+v", e)
	}
}

func TestConfigure_RefusesUnknownLabelsKeysAndValues(t *testing.T) {
	for _, tc := range []struct{ in, says string }{
		{"nope:kind=thin", `"nope" has no secret`},
		{"a:colour=blue", "unknown setting"},
		{"a:kind=fat", "snapshot or thin"},
		{"a:connect=maybe", "true or false"},
		{"a:stripe_id=acct_1", "we_... or an event destination's ed_"},
		{"a:test_events=keep", "forward, discard or queue-only"},
		{"a:quiet=soon", "duration"},
		{"a", "label:key=value"},
	} {
		eps, err := endpoint.ParseSecrets("a=whsec_a")
		if err != nil {
			t.Fatal(err)
		}
		if err := endpoint.Configure(eps, tc.in); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Configure(%q) = %v, want an error saying %q", tc.in, err, tc.says)
		}
	}
}

func TestFind(t *testing.T) {
	eps, err := endpoint.ParseSecrets("a=whsec_a;b=whsec_b")
	if err != nil {
		t.Fatal(err)
	}
	if e, err := endpoint.Find(eps, "b"); err != nil || e.Label != "b" {
		t.Errorf("Find(b) = %+v, %v", e, err)
	}
	if _, err := endpoint.Find(eps, "c"); !errors.Is(err, endpoint.ErrNoEndpoint) {
		t.Errorf("Find(c) = %v, want ErrNoEndpoint", err)
	}
}
