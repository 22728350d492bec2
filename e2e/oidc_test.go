package e2e

import (
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/hookd/hookd/e2e/e2etest"
)

// oidcProvider is the OpenID provider the tests sign in through:
// .ci/oidc-provider, ZITADEL's example provider with a groups claim the
// test changes (setGroups), a sign-in session and RP-initiated logout.
type oidcProvider struct {
	issuer string
}

// startOIDCProvider runs the provider on a free port, with its web client
// ("web", secret "secret") allowed to come back to publicURL's callback
// and, after a sign-out there, to its idp.SignedOutPath; groups gives the
// users' groups (user=group|group;...). Without the binary the test is
// skipped, saying how to build it, except with CI=true, where it fails.
func startOIDCProvider(t *testing.T, publicURL, groups string) *oidcProvider {
	t.Helper()
	bin := os.Getenv("HOOKD_E2E_OIDC_PROVIDER")
	if bin == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(home, ".cache", "hookd", "oidc-provider", "hookd-oidc-provider")
	}
	if _, err := os.Stat(bin); err != nil {
		msg := "the end-to-end tests' OpenID provider is not built (" + bin + "): run .ci/oidc-provider.sh (make test does)"
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
	cmd.Env = append(os.Environ(), "PORT="+port, "REDIRECT_URI="+publicURL+"/auth/oidc/callback",
		"POST_LOGOUT_REDIRECT_URI="+publicURL+"/auth/oidc/signed-out", "GROUPS="+groups)
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
			return &oidcProvider{issuer: issuer}
		}
	}
}

// setGroups sets user's groups at the provider, as its administrator
// would: none removes them from every group.
func (p *oidcProvider) setGroups(t *testing.T, user string, groups ...string) {
	t.Helper()
	resp, err := http.PostForm(p.issuer+"admin/groups", url.Values{"user": {user}, "groups": {strings.Join(groups, "|")}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("set %s's groups at the provider: HTTP %d", user, resp.StatusCode)
	}
}

// providerSignIn starts a sign-in with the provider from page, which is
// on hookd's sign-in page, and fills the provider's form as user.
func providerSignIn(t *testing.T, page playwright.Page, user string) {
	t.Helper()
	click(t, page.GetByTestId("oidc-signin"), "Sign in with your identity provider")
	must(t, page.GetByLabel("Username").Fill(user), "fill the provider's Username")
	must(t, page.GetByLabel("Password").Fill("verysecure"), "fill the provider's Password")
	click(t, page.GetByRole("button", playwright.PageGetByRoleOptions{Name: "Login"}), "the provider's Login")
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
	issuer := startOIDCProvider(t, publicURL, "").issuer
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
	})

	step(t, "SignInOnTheProvidersForm", func(t *testing.T) {
		providerSignIn(t, page, "test-user2")
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

// signInScene runs the provider, with test-user2 in hookd-admins, and
// hookd signing in through it, admins from hookd-admins, re-checking
// every recheck (HOOKD_OIDC_RECHECK). It returns hookd's public URL too.
func signInScene(t *testing.T, recheck string) (*oidcProvider, *hookd, string) {
	t.Helper()
	port := freePort(t)
	publicURL := "http://127.0.0.1:" + strconv.Itoa(port)
	p := startOIDCProvider(t, publicURL, "test-user2=hookd-admins")
	h := startHookdOn(t, func() int { return port },
		"HOOKD_PUBLIC_URL="+publicURL,
		"HOOKD_OIDC_ISSUER="+p.issuer,
		"HOOKD_OIDC_CLIENT_ID=web",
		"HOOKD_OIDC_CLIENT_SECRET=secret",
		"HOOKD_OIDC_ROLES=admin:hookd-admins,viewer:staff",
		"HOOKD_OIDC_RECHECK="+recheck,
	)
	return p, h, publicURL
}

// Signing out of hookd signs out at the provider too (its
// end_session_endpoint): on a shared computer, the next sign-in asks for
// a password again. Without it, the provider's own session signs the
// browser straight back in, which the test shows first.
func TestSignOutEndsTheProvidersSession(t *testing.T) {
	t.Parallel()
	_, h, publicURL := signInScene(t, "off")
	page := h.newPage(t)

	step(t, "SignIn", func(t *testing.T) {
		visit(t, page, "/login")
		providerSignIn(t, page, "test-user2")
		must(t, expect.Page(page).ToHaveURL(h.url("/")), "on hookd's overview")
		must(t, expect.Locator(page.Locator(".who .role")).ToHaveText("admin"), "admin from hookd-admins")
	})

	step(t, "TheProvidersSessionSignsInWithoutAPassword", func(t *testing.T) {
		// hookd's session alone gone (its cookie cleared), the provider's
		// is not: a sign-in needs no password.
		must(t, page.Context().ClearCookies(playwright.BrowserContextClearCookiesOptions{Name: "hookd_session"}), "clear hookd's cookie")
		visit(t, page, "/login")
		click(t, page.GetByTestId("oidc-signin"), "Sign in with your identity provider")
		must(t, expect.Page(page).ToHaveURL(h.url("/")), "back on the overview, no password asked")
	})

	step(t, "SignOutGoesThroughTheProvider", func(t *testing.T) {
		click(t, page.GetByRole("button", playwright.PageGetByRoleOptions{Name: "Sign out"}), "Sign out")
		must(t, expect.Page(page).ToHaveURL(h.url("/login?signed_out=1")), "back on hookd's sign-in page")
		must(t, expect.Locator(page.GetByText("You are signed out.")).ToBeVisible(), "the goodbye")
	})

	step(t, "TheNextSignInAsksForAPassword", func(t *testing.T) {
		click(t, page.GetByTestId("oidc-signin"), "Sign in with your identity provider")
		must(t, expect.Locator(page.GetByLabel("Password")).ToBeVisible(), "the provider's password field")
		if strings.HasPrefix(page.URL(), publicURL) {
			t.Errorf("signed straight back in: on %s", page.URL())
		}
	})
}

// A leaver: an admin signs in, is removed from the group at the provider,
// is refused at their next sign-in (from another browser), and the first
// browser's session is over; audited.
func TestALeaverIsRefusedAndTheirSessionEnds(t *testing.T) {
	t.Parallel()
	p, h, _ := signInScene(t, "off")
	first := h.newPage(t)

	step(t, "TheAdminSignsIn", func(t *testing.T) {
		visit(t, first, "/login")
		providerSignIn(t, first, "test-user2")
		visit(t, first, "/accounts")
		must(t, expect.Page(first).ToHaveURL(h.url("/accounts")), "the accounts page, for admins")
	})

	step(t, "RemovedAtTheProviderAndRefused", func(t *testing.T) {
		p.setGroups(t, "test-user2")
		second := h.newPage(t)
		visit(t, second, "/login")
		providerSignIn(t, second, "test-user2")
		must(t, expect.Locator(second.GetByText("Your groups give no role in hookd")).ToBeVisible(), "told why")
	})

	step(t, "TheFirstBrowsersSessionIsOver", func(t *testing.T) {
		visit(t, first, "/accounts")
		must(t, expect.Page(first).ToHaveURL(loginURL), "sent to sign in")
		if n := h.count(t, `SELECT count(*) FROM audit_log WHERE action = 'access_revoked'
			AND account_subject = 'id2' AND account_issuer = $1`, p.issuer); n != 1 {
			t.Errorf("%d access_revoked entries for id2, want 1", n)
		}
	})
}

// With a refresh token, the re-check ends a leaver's session without a
// sign-in: HOOKD_OIDC_RECHECK=1s here, 1h by default.
func TestTheRecheckEndsALeaversSession(t *testing.T) {
	t.Parallel()
	p, h, _ := signInScene(t, "1s")
	page := h.newPage(t)

	step(t, "TheAdminSignsIn", func(t *testing.T) {
		visit(t, page, "/login")
		providerSignIn(t, page, "test-user2")
		must(t, expect.Page(page).ToHaveURL(h.url("/")), "on the overview")
		if n := h.count(t, `SELECT count(*) FROM users WHERE oidc_subject = 'id2' AND oidc_refresh_token IS NOT NULL`); n != 1 {
			t.Fatalf("%d accounts of id2 keep a refresh token, want 1: the provider gave none", n)
		}
	})

	step(t, "ReCheckedWhileSignedIn", func(t *testing.T) {
		// A re-check that lets the admin in changes nothing.
		waitFor(t, "a re-check", func() bool {
			return h.count(t, `SELECT count(*) FROM users WHERE oidc_subject = 'id2'
				AND oidc_recheck_at > last_sign_in_at + interval '1.5 seconds'`) == 1
		})
		visit(t, page, "/accounts")
		must(t, expect.Page(page).ToHaveURL(h.url("/accounts")), "still an admin")
	})

	step(t, "RemovedAtTheProviderTheSessionEnds", func(t *testing.T) {
		p.setGroups(t, "test-user2")
		waitFor(t, "the re-check revokes the leaver", func() bool {
			return h.count(t, `SELECT count(*) FROM audit_log WHERE action = 'access_revoked' AND account_subject = 'id2'`) == 1
		})
		visit(t, page, "/")
		must(t, expect.Page(page).ToHaveURL(loginURL), "sent to sign in")
	})
}
