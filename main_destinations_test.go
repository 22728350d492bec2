package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRun_DestinationsCheck: `hookd destinations check` is dispatched to
// internal/destcmd: a valid file exits 0 with a line per destination and
// the hash, a refused one exits 1 with one line on stderr, a wrong command
// line exits 2.
func TestRun_DestinationsCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	for path, content := range map[string]string{
		good: "destinations:\n  - name: billing\n    url: https://billing.internal/stripe\n    types: [\"invoice.*\"]\n" +
			"    signing_secret_env: BILLING_SECRET\n",
		bad: "destinations:\n  - name: crm\n    url: ftp://crm.internal\n",
	} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := envOf(map[string]string{"BILLING_SECRET": "whsec_dGhlIGtleQ=="})
	hookd := func(args ...string) (stdout, stderr string, code int) {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, env, strings.NewReader(""), &out, &errOut); err != nil {
			code = exitCode(err, &errOut)
		}
		return out.String(), errOut.String(), code
	}

	out, errOut, code := hookd("destinations", "check", "-f", good)
	if lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); code != 0 || errOut != "" || len(lines) != 2 ||
		lines[0] != "billing  https://billing.internal/stripe  types invoice.*  every event of those types" ||
		!strings.HasPrefix(lines[1], "1 destinations, hash ") || len(lines[1]) != len("1 destinations, hash ")+64 {
		t.Errorf("check of a good file: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	out, errOut, code = hookd("destinations", "check", "-f", bad)
	if want := "hookd: " + bad + ": destination \"crm\": url: \"ftp://crm.internal\" is not http or https\n"; code != 1 || out != "" || errOut != want {
		t.Errorf("check of a bad file: exit %d\nstdout:\n%s\nstderr:\n%s\nwant:\n%s", code, out, errOut, want)
	}

	if _, errOut, code = hookd("destinations", "check"); code != 2 || !strings.Contains(errOut, "no file: give -f FILE") {
		t.Errorf("check without a file: exit %d\n%s", code, errOut)
	}
	if _, errOut, code = hookd("destinations"); code != 2 || !strings.Contains(errOut, "usage: hookd destinations check") {
		t.Errorf("destinations alone: exit %d\n%s", code, errOut)
	}
	if out, _, code = hookd("help"); code != 0 || !strings.Contains(out, "destinations check [-f FILE]") {
		t.Errorf("help does not list destinations check:\n%s", out)
	}
}
