package cli_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookd/hookd/internal/cli"
)

// answering is a server that answers every request with status, content
// type and body, and keeps the last request's path and Authorization.
func answering(t *testing.T, status int, contentType, body string) (*httptest.Server, *http.Request) {
	t.Helper()
	last := new(http.Request)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*last = *r.Clone(context.Background())
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, last
}

func exitOf(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return cli.ExitDone
	}
	var ce *cli.Error
	if !errors.As(err, &ce) {
		t.Fatalf("%v is no *cli.Error", err)
	}
	return ce.Code
}

// Each answer of hookd's is the exit code it means, and a problem's detail
// and field problems are the error's message.
func TestCommands_ExitCodeOfEachAnswer(t *testing.T) {
	t.Parallel()
	const problem = "application/problem+json"
	for _, c := range []struct {
		name          string
		status        int
		contentType   string
		body          string
		code          int
		wantInMessage string
	}{
		{"done", 200, "application/json", `{"events":[],"total":0}`, cli.ExitDone, ""},
		{"a 400 is bad usage", 400, problem,
			`{"type":"urn:hookd:problem:invalid-request","title":"Bad Request","status":400,"detail":"status: not one of the values","errors":[{"field":"limit","detail":"limit: number must be at most 200"}]}`,
			cli.ExitUsage, "400 Bad Request: status: not one of the values\n  limit: number must be at most 200"},
		{"a 403 is a refusal", 403, problem,
			`{"type":"about:blank","title":"Forbidden","status":403,"detail":"Token ci has the read scope."}`,
			cli.ExitRefused, "403 Forbidden: Token ci has the read scope."},
		{"a 503 is hookd failing", 503, problem,
			`{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"The read took longer than 5s."}`,
			cli.ExitUnreachable, "503 Service Unavailable: The read took longer than 5s."},
		{"a 502 of a proxy is hookd failing", 502, "text/html", `<html>Bad Gateway</html>`,
			cli.ExitUnreachable, "answered 502 Bad Gateway, not a problem of hookd's API"},
		{"a 404 of another server is a refusal", 404, "text/plain", `not found`,
			cli.ExitRefused, "is HOOKD_API_URL hookd's address?"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv, last := answering(t, c.status, c.contentType, c.body)
			env := map[string]string{"HOOKD_API_URL": srv.URL + "/", "HOOKD_API_TOKEN": "hkd_test"}
			var stdout, stderr bytes.Buffer
			err := cli.Events(context.Background(), []string{"list", "--json"}, func(k string) string { return env[k] }, &stdout, &stderr)
			if got := exitOf(t, err); got != c.code || (err != nil && !strings.Contains(err.Error(), c.wantInMessage)) {
				t.Errorf("exit %d (%v), want %d saying %q", got, err, c.code, c.wantInMessage)
			}
			if last.URL.Path != "/api/v1/events" || last.Header.Get("Authorization") != "Bearer hkd_test" {
				t.Errorf("asked %s with %q", last.URL.Path, last.Header.Get("Authorization"))
			}
			if c.code == cli.ExitDone && strings.TrimSpace(stdout.String()) != c.body {
				t.Errorf("--json printed %q, want the API's JSON", stdout.String())
			}
		})
	}
}

// Usage is refused before hookd is asked: no HOOKD_API_URL, a URL that is
// not http(s), an unknown subcommand, a missing argument, pause without a
// reason, a replay without a start.
func TestCommands_BadUsageIsExit2(t *testing.T) {
	t.Parallel()
	env := map[string]string{"HOOKD_API_URL": "http://127.0.0.1:1", "HOOKD_API_TOKEN": "hkd_test"}
	getenv := func(k string) string { return env[k] }
	for name, run := range map[string]func() error{
		"no URL": func() error {
			return cli.Events(context.Background(), []string{"list"}, func(string) string { return "" }, &bytes.Buffer{}, &bytes.Buffer{})
		},
		"ftp URL": func() error {
			return cli.Pause(context.Background(), []string{"--reason", "x"}, func(k string) string {
				return map[string]string{"HOOKD_API_URL": "ftp://hookd", "HOOKD_API_TOKEN": "t"}[k]
			}, &bytes.Buffer{}, &bytes.Buffer{})
		},
		"unknown subcommand": func() error {
			return cli.Events(context.Background(), []string{"delete"}, getenv, &bytes.Buffer{}, &bytes.Buffer{})
		},
		"show without an id": func() error {
			return cli.Events(context.Background(), []string{"show"}, getenv, &bytes.Buffer{}, &bytes.Buffer{})
		},
		"pause without a reason": func() error {
			return cli.Pause(context.Background(), nil, getenv, &bytes.Buffer{}, &bytes.Buffer{})
		},
		"replay without --from": func() error {
			return cli.Replay(context.Background(), []string{"create", "--name", "x"}, getenv, &bytes.Buffer{}, &bytes.Buffer{})
		},
		"a bad status": func() error {
			return cli.Replay(context.Background(), []string{"create", "--name", "x", "--from", "24h", "--status", "lost"}, getenv,
				&bytes.Buffer{}, &bytes.Buffer{})
		},
	} {
		if got := exitOf(t, run()); got != cli.ExitUsage {
			t.Errorf("%s: exit %d, want %d", name, got, cli.ExitUsage)
		}
	}
}
