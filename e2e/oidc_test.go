package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/hookd/hookd/e2e/e2etest"
)

// oidcProviderVersion is the github.com/zitadel/oidc whose example provider
// these tests sign in through; .ci/oidc-provider.sh installs the same.
const oidcProviderVersion = "v3.52.0"

// startOIDCProvider runs ZITADEL's example OpenID provider on a free port,
// with its web client ("web", secret "secret") allowed to come back to
// redirectURL alone, and returns its issuer. Without the binary the test
// is skipped, saying how to install it, except with CI=true, where it
// fails.
func startOIDCProvider(t *testing.T, redirectURL string) string {
	t.Helper()
	bin := os.Getenv("HOOKD_E2E_OIDC_PROVIDER")
	if bin == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(home, ".cache", "hookd", "zitadel-oidc-op-"+oidcProviderVersion, "server")
	}
	if _, err := os.Stat(bin); err != nil {
		msg := "ZITADEL's example OpenID provider is not installed (" + bin + "): run .ci/oidc-provider.sh (make test does)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	port := strconv.Itoa(freePort(t))
	// The provider names itself after localhost, which its fixed users'
	// names and the issuer in its tokens carry.
	issuer := "http://localhost:" + port + "/"
	log := &e2etest.SyncBuffer{}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "PORT="+port, "REDIRECT_URI="+redirectURL)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = hookdProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the OpenID provider: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			saveFile(t, "oidc-provider.log", log.Bytes())
		}
	})

	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			t.Fatalf("the OpenID provider exited before it answered (%v):\n%s", err, log)
		case <-deadline:
			t.Fatalf("the OpenID provider did not publish its discovery document within 30 s:\n%s", log)
		case <-tick.C:
		}
		resp, err := client.Get(issuer + ".well-known/openid-configuration")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return issuer
		}
	}
}

// TestSignInThroughTheIdentityProvider signs in through a real provider's
// login form, in Chromium, following every redirect of the flow, and lands
// on the overview with the role the provider's claim maps to. The example
// provider sends no groups, so the claim read is preferred_username, one
// string per person, which hookd takes as that person's one group.
func TestSignInThroughTheIdentityProvider(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	publicURL := "http://127.0.0.1:" + strconv.Itoa(port)
	issuer := startOIDCProvider(t, publicURL+"/auth/oidc/callback")
	h := startHookdOn(t, func() int { return port },
		"HOOKD_PUBLIC_URL="+publicURL,
		"HOOKD_OIDC_ISSUER="+issuer,
		"HOOKD_OIDC_CLIENT_ID=web",
		"HOOKD_OIDC_CLIENT_SECRET=secret",
		"HOOKD_OIDC_GROUPS_CLAIM=preferred_username",
		"HOOKD_OIDC_ROLES=admin:test-user@localhost,operator:test-user2",
	)
	page := h.newPage(t)

	step(t, "TheProvidersButtonComesFirst", func(t *testing.T) {
		visit(t, page, "/")
		must(t, expect.Page(page).ToHaveURL(loginURL), "/ without a session redirects to /login")
		click(t, page.GetByTestId("oidc-signin"), "Sign in with your identity provider")
	})

	step(t, "SignInOnTheProvidersForm", func(t *testing.T) {
		must(t, page.GetByLabel("Username").Fill("test-user2"), "fill the provider's Username")
		must(t, page.GetByLabel("Password").Fill("verysecure"), "fill the provider's Password")
		click(t, page.GetByRole("button", playwright.PageGetByRoleOptions{Name: "Login"}), "the provider's Login")
	})

	step(t, "LandsOnTheOverviewWithTheMappedRole", func(t *testing.T) {
		must(t, expect.Page(page).ToHaveURL(h.url("/")), "back on hookd's overview")
		must(t, expect.Locator(page.GetByTestId("count-failed")).ToBeVisible(), "overview counts")
		must(t, expect.Locator(page.Locator(".who .role")).ToHaveText("operator"), "the role test-user2 maps to")
		must(t, expect.Locator(page.Locator(".who .email")).ToHaveText("test-user2@zitadel.ch"), "the provider's email")
	})

	step(t, "TheSignInIsAudited", func(t *testing.T) {
		if n := h.count(t, `SELECT count(*) FROM audit_log WHERE action = 'oidc_login'
			AND target = 'issuer ' || $1::text || ', subject id2: role operator, first sign-in'`, issuer); n != 1 {
			t.Errorf("%d audit entries for the sign-in, want 1", n)
		}
		if n := h.count(t, `SELECT count(*) FROM users WHERE oidc_issuer = $1 AND oidc_subject = 'id2' AND role = 'operator'`, issuer); n != 1 {
			t.Errorf("%d accounts for id2 as operator, want 1", n)
		}
	})
}
