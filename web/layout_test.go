package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/queue"
)

// Browsers ask every page for an icon; the layout names one that exists, so
// no page logs a 404 in the console.
func TestLayout_LinksAFaviconThatIsServed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.client(t)
	login := c.get("/login")
	href, ok := login.doc.Find(`link[rel="icon"]`).Attr("href")
	if !ok {
		t.Fatal("the layout links no icon")
	}
	icon := c.get(href)
	if icon.status != http.StatusOK || icon.header.Get("Content-Type") != "image/svg+xml" ||
		!strings.Contains(icon.body, "<svg") {
		t.Errorf("GET %s: %d %q, %d bytes; want 200 image/svg+xml with an <svg>", href, icon.status,
			icon.header.Get("Content-Type"), len(icon.body))
	}
	if title := login.doc.Find("title").Text(); title != "Sign in · hookd" {
		t.Errorf("login title = %q, want %q", title, "Sign in · hookd")
	}
}

// The demo's backoff is announced on every page, signed in or not, and
// nowhere without it.
func TestLayout_DemoBackoffBanner(t *testing.T) {
	t.Parallel()
	db := setup(t, withStoreOptions(queue.WithDemoBackoff()))
	c := db.client(t)
	for _, path := range []string{"/login", "/no-such-page"} {
		banner := c.get(path).doc.Find(`[data-testid="demo-banner"]`).Text()
		if !strings.Contains(banner, "Demo backoff: seconds, not hours") {
			t.Errorf("%s with the demo backoff: banner %q, want it to say so", path, banner)
		}
	}
	c.signIn(accounts.RoleViewer)
	if c.get("/").doc.Find(`[data-testid="demo-banner"]`).Length() != 1 {
		t.Error("the overview shows no demo banner")
	}

	plain := setup(t).client(t)
	if n := plain.get("/login").doc.Find(`[data-testid="demo-banner"]`).Length(); n != 0 {
		t.Errorf("without the demo backoff the login page shows %d demo banners, want none", n)
	}
}
