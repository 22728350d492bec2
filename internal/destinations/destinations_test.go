package destinations_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/destinations"
)

var (
	secretNew = "whsec_" + base64.StdEncoding.EncodeToString([]byte("the new key"))
	secretOld = "whsec_" + base64.StdEncoding.EncodeToString([]byte("the previous key"))
)

// env is a process environment of the variables the files name.
func env(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

// writeFile writes content to a destinations file of its own.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "destinations.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// specExample is SPEC.md's example, every key set.
const specExample = `destinations:
  - name: billing                    # ^[a-z0-9][a-z0-9-]{0,39}$
    url: https://billing.internal/stripe
    types: ["invoice.*"]             # exact or glob; default ["*"]
    livemode: any                    # live | test | any
    accounts: [any]                  # platform | acct_... | any
    endpoints: [any]                 # endpoint labels | any
    filter: "data.object.amount >= 1000"   # CEL over the event, optional
    rate: 20                         # calls/s across replicas, optional
    concurrency: 8                   # optional
    timeout: 10s                     # optional
    order_by: data.object.customer   # one at a time per key, in accepted order
    signing_secret_env: BILLING_WEBHOOK_SECRET   # Standard Webhooks secret
    headers_env: {Authorization: BILLING_AUTH}   # extra headers, values from env
  - name: crm
    url: http://crm.internal:8080/hooks/stripe
`

var specEnv = env(map[string]string{
	"BILLING_WEBHOOK_SECRET": " " + secretNew + "\n\t" + secretOld + " ",
	"BILLING_AUTH":           "Bearer billing-token",
})

// TestLoad_ReadsEveryKey: SPEC's example is read key by key, a
// destination that leaves its route out takes every event, and the
// signing variable's secrets are kept in order, the new one first.
func TestLoad_ReadsEveryKey(t *testing.T) {
	t.Parallel()
	set, err := destinations.Load(writeFile(t, specExample), specEnv)
	if err != nil {
		t.Fatal(err)
	}
	if set.Source != destinations.SourceFile || !slices.Equal(set.Names(), []string{"billing", "crm"}) || len(set.Hash) != 64 {
		t.Fatalf("set: source %q, names %v, hash %q", set.Source, set.Names(), set.Hash)
	}
	b := set.Get("billing")
	checks := []struct {
		field     string
		got, want any
	}{
		{"url", b.URL, "https://billing.internal/stripe"},
		{"types", strings.Join(b.Types, ","), "invoice.*"},
		{"livemode", b.Livemode, "any"},
		{"accounts", strings.Join(b.Accounts, ","), "any"},
		{"endpoints", strings.Join(b.Endpoints, ","), "any"},
		{"filter", b.Filter, "data.object.amount >= 1000"},
		{"rate", b.Rate, 20.0},
		{"concurrency", b.Concurrency, 8},
		{"timeout", b.Timeout, 10 * time.Second},
		{"order_by", b.OrderBy, "data.object.customer"},
		{"signing_secret_env", b.SigningSecretEnv, "BILLING_WEBHOOK_SECRET"},
		{"signing secrets", strings.Join(b.SigningSecrets, " "), secretNew + " " + secretOld},
		{"headers_env", b.HeadersEnv["Authorization"], "BILLING_AUTH"},
		{"headers", b.Headers.Get("Authorization"), "Bearer billing-token"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("billing's %s = %v, want %v", c.field, c.got, c.want)
		}
	}
	crm := set.Get("crm")
	if !slices.Equal(crm.Types, []string{"*"}) || crm.Livemode != "any" || !slices.Equal(crm.Accounts, []string{"any"}) ||
		!slices.Equal(crm.Endpoints, []string{"any"}) || crm.Filter != "" || crm.Rate != 0 || crm.Concurrency != 0 ||
		crm.Timeout != 0 || crm.OrderBy != "" || crm.SigningSecrets != nil || crm.Headers != nil {
		t.Errorf("crm, which sets a name and a url alone, has no defaults: %+v", crm)
	}
	if set.Get("nobody") != nil {
		t.Error("Get of a name no destination has gave one")
	}
}

// TestLoad_RefusesBadInput: each bad file is refused with one line naming
// the file, the destination and the field, and no Set.
func TestLoad_RefusesBadInput(t *testing.T) {
	t.Parallel()
	vars := env(map[string]string{"GOOD_SECRET": secretNew, "BAD_PREFIX": "sk_live_123",
		"BAD_BASE64": "whsec_not*base64", "SECOND_BAD": secretNew + " whsec_", "AUTH": "Bearer x", "NEWLINE": "a\nb"})
	const head = "destinations:\n  - name: a\n    url: https://app.example/hook\n"
	tests := []struct{ name, file, want string }{
		{"empty file", "", `no destinations: the file is empty`},
		{"no destinations", "destinations:\n", `no destinations: the file must list at least one under destinations`},
		{"an empty list", "destinations: []\n", `no destinations: the file must list at least one under destinations`},
		{"unknown top key", "destination:\n  - name: a\n", `unknown key "destination" (line 1): a destinations file holds one key, destinations`},
		{"not a mapping", "- name: a\n", `want a mapping with the key destinations (line 1)`},
		{"destinations not a list", "destinations: a\n", `destinations: want a list of destinations (line 1)`},
		{"two documents", head + "---\ndestinations: []\n", `more than one YAML document (---): a destinations file is one`},
		{"syntax", "destinations:\n  - name: a\n  url: x\n", `yaml: line 1: did not find expected '-' indicator`},
		{"unknown key, no name", "destinations:\n  - urll: https://x\n", `destinations[0]: unknown key "urll" (line 2)`},
		{"unknown key", head + "    urll: https://x\n", `destination "a": unknown key "urll" (line 4)`},
		{"unknown key, second", head + "  - name: b\n    url: https://x\n    filters: x\n", `destination "b": unknown key "filters" (line 6)`},
		{"key twice", head + "    url: https://other.example\n", `destination "a": url: given twice (line 4)`},
		{"not a list", head + "    types: invoice.*\n", `destination "a": types: "invoice.*" is not a list of strings, like [a, b] (line 4)`},
		{"not a number", head + "    concurrency: many\n", `destination "a": concurrency: "many" is not a whole number (line 4)`},
		{"not a map", head + "    headers_env: [A]\n", `destination "a": headers_env: want a map of header names to variable names, like {Authorization: APP_AUTH} (line 4)`},
		{"not a string", head + "    livemode: [live]\n", `destination "a": livemode: want a string (line 4)`},
		{"no name", "destinations:\n  - url: https://x\n", `destinations[0]: name: missing (a name like billing, matching ^[a-z0-9][a-z0-9-]{0,39}$)`},
		{"bad name", head + "  - name: b\n    url: https://x\n  - name: Bad_Name\n    url: https://x\n", `destinations[2]: name: "Bad_Name" does not match ^[a-z0-9][a-z0-9-]{0,39}$`},
		{"long name", "destinations:\n  - name: " + strings.Repeat("a", 41) + "\n", `destinations[0]: name: "` + strings.Repeat("a", 41) + `" does not match ^[a-z0-9][a-z0-9-]{0,39}$`},
		{"name twice", head + "  - name: b\n    url: https://x\n  - name: a\n    url: https://x\n", `destination "a": name: used by destinations[0] too`},
		{"no url", "destinations:\n  - name: crm\n", `destination "crm": url: missing (the app's http or https URL)`},
		{"ftp url", "destinations:\n  - name: crm\n    url: ftp://x\n", `destination "crm": url: "ftp://x" is not http or https`},
		{"relative url", "destinations:\n  - name: crm\n    url: /hook\n", `destination "crm": url: "/hook" is not http or https`},
		{"no host", "destinations:\n  - name: crm\n    url: https:///hook\n", `destination "crm": url: "https:///hook" has no host`},
		{"url's secret unsaid", "destinations:\n  - name: crm\n    url: ftp://user:pw@x/p?token=t\n", `destination "crm": url: "ftp://x/p" is not http or https`},
		{"bad glob", head + "    types: [\"invoice.[\"]\n", `destination "a": types: bad glob "invoice.[": an event type, or a glob where * alone is a wildcard (invoice.*, *)`},
		{"glob ?", head + "    types: [\"invoice.?aid\"]\n", `destination "a": types: bad glob "invoice.?aid": an event type, or a glob where * alone is a wildcard (invoice.*, *)`},
		{"empty type", head + "    types: [\"\"]\n", `destination "a": types: bad glob "": an event type, or a glob where * alone is a wildcard (invoice.*, *)`},
		{"empty types", head + "    types: []\n", `destination "a": types: empty: it would take no event (leave it out for *)`},
		{"empty accounts", head + "    accounts: []\n", `destination "a": accounts: empty: it would take no event (leave it out for any)`},
		{"empty endpoints", head + "    endpoints: []\n", `destination "a": endpoints: empty: it would take no event (leave it out for any)`},
		{"livemode", head + "    livemode: true\n", `destination "a": livemode: "true" is not live, test or any`},
		{"account", head + "    accounts: [platform, cus_1]\n", `destination "a": accounts: "cus_1" is not platform, a connected account id acct_... or any`},
		{"bare acct_", head + "    accounts: [acct_]\n", `destination "a": accounts: "acct_" is not platform, a connected account id acct_... or any`},
		{"endpoint", head + "    endpoints: [\"a b\"]\n", `destination "a": endpoints: "a b" is not an endpoint label (HOOKD_ENDPOINTS') or any`},
		{"concurrency", head + "    concurrency: -1\n", `destination "a": concurrency: -1 is below zero (0 or left out: the default)`},
		{"zero rate", head + "    rate: 0\n", `destination "a": rate: 0 is not a number of calls a second greater than zero (leave it out for no bound)`},
		{"negative rate", head + "    rate: -2.5\n", `destination "a": rate: -2.5 is not a number of calls a second greater than zero (leave it out for no bound)`},
		{"NaN rate", head + "    rate: .nan\n", `destination "a": rate: NaN is not a number of calls a second greater than zero (leave it out for no bound)`},
		{"timeout", head + "    timeout: 10\n", `destination "a": timeout: "10" is not a duration like 10s or 1m30s`},
		{"zero timeout", head + "    timeout: 0s\n", `destination "a": timeout: 0s is not greater than zero (leave it out for the default)`},
		{"long timeout", head + "    timeout: 2m1s\n", `destination "a": timeout: 2m1s is longer than 2m0s: a retry holds its event for a batch's worth of it`},
		{"order_by", head + "    order_by: data.object[0]\n", `destination "a": order_by: "data.object[0]" is not a field path like data.object.customer`},
		{"filter", head + "    filter: dat.object.amount >= 1000\n", `destination "a": filter: ERROR: <input>:1:1: undeclared reference to 'dat'`},
		{"filter syntax", head + "    filter: \"data.object.amount >=\"\n", `destination "a": filter: ERROR: <input>:1:22: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}`},
		{"filter not bool", head + "    filter: \"1 + 2\"\n", `destination "a": filter: gives int, not a bool (true takes the event)`},
		{"secret unset", head + "    signing_secret_env: BILLING_SECRET\n", `destination "a": signing_secret_env: BILLING_SECRET is empty`},
		{"secret not whsec_", head + "    signing_secret_env: BAD_PREFIX\n", `destination "a": signing_secret_env: BAD_PREFIX: secret 1 of 1: must look like whsec_<base64>`},
		{"secret not base64", head + "    signing_secret_env: BAD_BASE64\n", `destination "a": signing_secret_env: BAD_BASE64: secret 1 of 1: the part after whsec_ is not valid base64`},
		{"second secret bad", head + "    signing_secret_env: SECOND_BAD\n", `destination "a": signing_secret_env: SECOND_BAD: secret 2 of 2: the part after whsec_ is not valid base64`},
		{"header unset", head + "    headers_env: {Authorization: BILLING_AUTH}\n", `destination "a": headers_env: Authorization: BILLING_AUTH is empty`},
		{"header name", head + "    headers_env: {\"X Token\": AUTH}\n", `destination "a": headers_env: X Token: not a header name`},
		{"header of hookd", head + "    headers_env: {hookd-event-id: AUTH}\n", `destination "a": headers_env: hookd-event-id: hookd sets this header itself`},
		{"signature header", head + "    headers_env: {Webhook-Signature: AUTH}\n", `destination "a": headers_env: Webhook-Signature: hookd sets this header itself`},
		{"header no variable", head + "    headers_env: {Authorization: \"\"}\n", `destination "a": headers_env: Authorization: names no variable`},
		{"header newline", head + "    headers_env: {Authorization: NEWLINE}\n", `destination "a": headers_env: Authorization: NEWLINE holds a character a header value may not (a newline?)`},
		{"header twice", head + "    headers_env: {Authorization: AUTH, authorization: AUTH}\n", `destination "a": headers_env: authorization: given twice, in two spellings`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, tc.file)
			set, err := destinations.Load(path, vars)
			if err == nil {
				t.Fatalf("Load took the file, as %v", set.Names())
			}
			if set != nil {
				t.Errorf("Load refused the file but gave a set too")
			}
			if want := path + ": " + tc.want; err.Error() != want {
				t.Errorf("Load said\n%s\nwant\n%s", err, want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("the error is more than one line: %q", err)
			}
		})
	}
}

// TestLoad_SaysTheFileItCannotRead names the file that is not there.
func TestLoad_SaysTheFileItCannotRead(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "missing.yaml")
	_, err := destinations.Load(path, env(nil))
	if err == nil || err.Error() != path+": no such file or directory" || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing file: %v", err)
	}
}

// TestParse_NeverShowsASecret: no error shows a variable's value.
func TestParse_NeverShowsASecret(t *testing.T) {
	t.Parallel()
	const secret = "sk_live_do_not_show"
	for _, file := range []string{
		"destinations:\n  - name: a\n    url: https://x\n    signing_secret_env: S\n",
		"destinations:\n  - name: a\n    url: https://x\n    headers_env: {Host: S}\n",
	} {
		_, err := destinations.Parse([]byte(file), env(map[string]string{"S": secret}))
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("Parse(%q) = %v", file, err)
		}
	}
}

// TestSingle is HOOKD_FORWARD_URL alone: one destination, default,
// taking every event.
func TestSingle(t *testing.T) {
	t.Parallel()
	set := destinations.Single("https://app.example/hook")
	if set.Source != destinations.SourceForwardURL || !slices.Equal(set.Names(), []string{"default"}) || len(set.Hash) != 64 {
		t.Fatalf("Single: source %q, names %v, hash %q", set.Source, set.Names(), set.Hash)
	}
	d := set.Get("default")
	if d.URL != "https://app.example/hook" || d.Filter != "" || d.Concurrency != 0 || d.Timeout != 0 || d.Rate != 0 ||
		d.SigningSecrets != nil || d.Headers != nil {
		t.Errorf("default has settings of its own, HOOKD_FORWARD_*'s being its: %+v", d)
	}
	no := false
	for _, ev := range []destinations.Event{
		{Type: "invoice.paid"},
		{Type: "v1.billing.meter.error_report_triggered", Livemode: &no, Account: "acct_1", Endpoint: "connect"},
		{Type: "", Payload: []byte("not JSON")},
	} {
		matched, failed := set.Route(ev)
		if len(matched) != 1 || matched[0] != d || failed != nil {
			t.Errorf("Route(%+v) = %v, %v; want default alone", ev, matched, failed)
		}
	}
	if destinations.Single("https://app.example/hook").Hash != set.Hash || destinations.Single("https://other.example").Hash == set.Hash {
		t.Error("Single's hash is not the URL's alone")
	}
}

// TestCheckEndpoints: a destination naming an endpoint hookd does not
// serve is refused, naming it and the ones it serves; any always passes.
func TestCheckEndpoints(t *testing.T) {
	t.Parallel()
	set := parse(t, "destinations:\n  - name: a\n    url: https://x\n  - name: connect-only\n    url: https://x\n    endpoints: [connect, cnect]\n")
	if err := set.CheckEndpoints([]string{"connect", "cnect"}); err != nil {
		t.Errorf("every label served: %v", err)
	}
	err := set.CheckEndpoints([]string{"default", "connect"})
	if want := `destination "connect-only": endpoints: "cnect" is no endpoint's label (hookd serves default, connect)`; fmt.Sprint(err) != want {
		t.Errorf("CheckEndpoints = %v, want %s", err, want)
	}
}

// TestDisplayURL shows no part of the URL that may carry a secret.
func TestDisplayURL(t *testing.T) {
	t.Parallel()
	d := parse(t, "destinations:\n  - name: a\n    url: https://user:pw@app.example:8443/hooks/stripe?token=t#f\n").Destinations[0]
	if got := d.DisplayURL(); got != "https://app.example:8443/hooks/stripe" {
		t.Errorf("DisplayURL = %s", got)
	}
}
