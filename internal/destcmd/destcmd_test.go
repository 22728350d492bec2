package destcmd_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookd/hookd/internal/destcmd"
	"github.com/hookd/hookd/internal/destinations"
)

const goodFile = `destinations:
  - name: billing
    url: https://user:pw@billing.internal/stripe?token=t
    types: ["invoice.*", "charge.refunded"]
    livemode: live
    accounts: [platform]
    filter: |
      data.object.amount >= 1000 &&
      data.object.currency == "usd"
    headers_env: {Authorization: BILLING_AUTH}
  - name: crm
    url: http://crm.internal:8080/hooks
    endpoints: [connect]
  - name: analytics
    url: https://analytics.internal/in
`

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "destinations.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// run runs `hookd destinations args...` with the environment vars.
func run(vars map[string]string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = destcmd.Run(context.Background(), args, func(k string) string { return vars[k] }, &out, &errOut)
	return out.String(), errOut.String(), err
}

func exitCode(err error) int {
	var coded *destcmd.Error
	if errors.As(err, &coded) {
		return coded.ExitCode()
	}
	if err != nil {
		return -1
	}
	return destcmd.ExitValid
}

// TestCheck_SaysWhatEachDestinationTakes: a valid file is a line for each
// destination (no secret of its URL), what it routes on, and the hash
// Load gives, exit 0; the file comes from -f or HOOKD_DESTINATIONS_FILE.
func TestCheck_SaysWhatEachDestinationTakes(t *testing.T) {
	t.Parallel()
	path := writeFile(t, goodFile)
	vars := map[string]string{"BILLING_AUTH": "Bearer secret-token", "STRIPE_WEBHOOK_SECRETS": "default=whsec_a;connect=whsec_b"}
	set, err := destinations.Load(path, func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := "billing    https://billing.internal/stripe  types invoice.*,charge.refunded  livemode live; accounts platform; filter data.object.amount >= 1000 && data.object.currency == \"usd\"\n" +
		"crm        http://crm.internal:8080/hooks   types *                          endpoints connect\n" +
		"analytics  https://analytics.internal/in    types *                          every event of those types\n" +
		"3 destinations, hash " + set.Hash + "\n"
	out, errOut, err := run(vars, "check", "-f", path)
	if err != nil || out != want || errOut != "" {
		t.Errorf("check -f: %v\nstdout:\n%s\nwant:\n%s\nstderr:\n%s", err, out, want, errOut)
	}
	vars["HOOKD_DESTINATIONS_FILE"] = path
	if out, _, err := run(vars, "check"); err != nil || out != want {
		t.Errorf("check with HOOKD_DESTINATIONS_FILE: %v\n%s", err, out)
	}
	for _, secret := range []string{"pw", "token=t", "secret-token"} {
		if strings.Contains(out, secret) {
			t.Errorf("check printed %q", secret)
		}
	}
}

// TestCheck_RefusesWithOneLine: a refused file is one line naming the
// file, the destination and the field, exit 1; a wrong command line is
// exit 2.
func TestCheck_RefusesWithOneLine(t *testing.T) {
	t.Parallel()
	bad := writeFile(t, strings.Replace(goodFile, "data.object.amount", "dat.object.amount", 1))
	good := writeFile(t, goodFile)
	vars := map[string]string{"BILLING_AUTH": "x"}
	tests := []struct {
		name string
		vars map[string]string
		args []string
		code int
		want string
	}{
		{"bad filter", vars, []string{"check", "-f", bad}, destcmd.ExitInvalid,
			bad + `: destination "billing": filter: ERROR: <input>:1:1: undeclared reference to 'dat'`},
		{"empty variable", nil, []string{"check", "-f", good}, destcmd.ExitInvalid,
			good + `: destination "billing": headers_env: Authorization: BILLING_AUTH is empty`},
		{"no such file", vars, []string{"check", "-f", good + ".missing"}, destcmd.ExitInvalid,
			good + ".missing: no such file or directory"},
		{"unserved endpoint", map[string]string{"BILLING_AUTH": "x", "STRIPE_WEBHOOK_SECRET": "whsec_a"}, []string{"check", "-f", good}, destcmd.ExitInvalid,
			good + `: destination "crm": endpoints: "connect" is no endpoint's label (hookd serves default)`},
		{"no subcommand", vars, nil, destcmd.ExitUsage, destcmd.Usage},
		{"unknown subcommand", vars, []string{"apply"}, destcmd.ExitUsage, "unknown destinations command \"apply\"\n" + destcmd.Usage},
		{"no file", vars, []string{"check"}, destcmd.ExitUsage, "no file: give -f FILE, or set HOOKD_DESTINATIONS_FILE\n" + destcmd.Usage},
		{"extra argument", vars, []string{"check", "-f", good, "more"}, destcmd.ExitUsage, "unexpected argument \"more\"\n" + destcmd.Usage},
		{"unknown flag", vars, []string{"check", "-file", good}, destcmd.ExitUsage, "flag provided but not defined: -file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, _, err := run(tc.vars, tc.args...)
			if code := exitCode(err); code != tc.code || err.Error() != tc.want {
				t.Errorf("exit %d (%v), want %d:\n%s", code, err, tc.code, tc.want)
			}
			if out != "" {
				t.Errorf("a refusal printed on stdout: %q", out)
			}
		})
	}
	if _, errOut, err := run(vars, "check", "-h"); !errors.Is(err, flag.ErrHelp) || !strings.Contains(errOut, "Usage: hookd destinations check") {
		t.Errorf("check -h: %v\n%s", err, errOut)
	}
}
