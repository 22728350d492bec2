package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// HOOKD_API_ADDR puts /api/v1 on a listener of its own: there it answers
// (a 401 asking for a token, its document without one), and the listen
// address the receiver shares answers it with a 404, as a problem.
func TestRunServeAPIOnItsOwnListener(t *testing.T) {
	t.Parallel()
	apiAddr := freeAddr(t)
	base, stop, stderr := startServe(t, map[string]string{"HOOKD_PROCESSOR": "discard", "HOOKD_API_ADDR": apiAddr})
	get := func(url string) (int, string, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
	}
	if status, ct, body := get("http://" + apiAddr + "/api/v1/events"); status != http.StatusUnauthorized || ct != "application/problem+json" {
		t.Errorf("API listener /api/v1/events: %d %s, want a 401 problem:\n%s", status, ct, body)
	}
	status, _, body := get("http://" + apiAddr + "/api/v1/openapi.json")
	var doc struct {
		OpenAPI string `json:"openapi"`
	}
	if status != http.StatusOK || json.Unmarshal([]byte(body), &doc) != nil || doc.OpenAPI != "3.0.3" {
		t.Errorf("API listener /api/v1/openapi.json: %d, want the 3.0.3 document:\n%.200s", status, body)
	}
	if status, ct, body := get(base + "/api/v1/events"); status != http.StatusNotFound || ct != "application/problem+json" {
		t.Errorf("listen address /api/v1/events: %d %s, want a 404 problem:\n%s", status, ct, body)
	}
	if status, _, _ := get("http://" + apiAddr + "/login"); status != http.StatusNotFound {
		t.Errorf("API listener /login: %d, want 404: the dashboard is not there", status)
	}
	if err := stop(); err != nil {
		t.Fatalf("run after cancel: %v\n%s", err, stderr)
	}
}

// Without HOOKD_API_ADDR, /api/v1 is on the listen address.
func TestRunServeAPIOnTheListenAddress(t *testing.T) {
	t.Parallel()
	base, stop, stderr := startServe(t, map[string]string{"HOOKD_PROCESSOR": "discard"})
	resp, err := http.Get(base + "/api/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("/api/v1/events: %d, want a 401 asking for a bearer token", resp.StatusCode)
	}
	if err := stop(); err != nil {
		t.Fatalf("run after cancel: %v\n%s", err, stderr)
	}
}

// The actions hookd serve shares between the dashboard and /api/v1 have
// the stores they need: an admin token lists the accounts and adds one.
func TestRunServeAPIActionsHaveTheirStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := setup(t).dbURL
	env := envOf(map[string]string{"DATABASE_URL": dbURL})
	hookd := func(stdin string, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := run(ctx, args, env, strings.NewReader(stdin), &out, &errOut); err != nil {
			t.Fatalf("hookd %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
		}
		return out.String()
	}
	hookd("long enough\n", "user", "add", "admin@example.com", "-role", "admin")
	secret := strings.TrimSpace(hookd("", "tokens", "create", "--name", "admin bot", "--scope", "admin", "--account", "admin@example.com"))
	base, stop, stderr := startServe(t, map[string]string{"HOOKD_PROCESSOR": "discard", "DATABASE_URL": dbURL})
	call := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+"/api/v1"+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := call(http.MethodPost, "/accounts",
		`{"email": "ann@example.com", "password": "correct horse battery", "role": "viewer"}`); status != http.StatusCreated {
		t.Errorf("POST /api/v1/accounts: %d, want 201:\n%s", status, body)
	}
	if status, body := call(http.MethodGet, "/accounts", ""); status != http.StatusOK ||
		!strings.Contains(body, `"admin@example.com"`) || !strings.Contains(body, `"ann@example.com"`) {
		t.Errorf("GET /api/v1/accounts: %d, want both accounts:\n%s", status, body)
	}
	if status, body := call(http.MethodGet, "/reconcile", ""); status != http.StatusOK || !strings.Contains(body, `"enabled":false`) {
		t.Errorf("GET /api/v1/reconcile: %d, want reconciliation off, without STRIPE_API_KEY:\n%s", status, body)
	}
	if err := stop(); err != nil {
		t.Fatalf("run after cancel: %v\n%s", err, stderr)
	}
}
