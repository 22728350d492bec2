package web_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/queue"
)

// A form far larger than any dashboard form is refused with a 413 saying
// why, whether its size is announced or only found out while reading.
func TestForms_LargerThan64KiBIs413(t *testing.T) {
	t.Parallel()
	b := setup(t)
	big := strings.Repeat("x", 100<<10)

	anon := b.client(t)
	anon.get("/login")
	r := anon.post("/login", url.Values{"email": {"a@example.com"}, "password": {big}})
	wantStatus(t, r, http.StatusRequestEntityTooLarge)
	if alert := r.doc.Find(`[role="alert"]`).Text(); !strings.Contains(alert, "64 KiB") {
		t.Errorf("413 page says %q, want it to name the 64 KiB limit", alert)
	}

	c := b.client(t)
	c.signIn(accounts.RoleOperator)
	form := url.Values{"_csrf": {c.csrf}, "type": {big}}.Encode()
	// No Content-Length: the limit is found while reading.
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/events/retry-all/preview",
		io.MultiReader(strings.NewReader(form)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if req.ContentLength != 0 {
		t.Fatalf("the request announces %d bytes; want it sent chunked", req.ContentLength)
	}
	r = c.do(req)
	wantStatus(t, r, http.StatusRequestEntityTooLarge)

	// A form just under the limit is read as before.
	r = c.post("/events/retry-all/preview", url.Values{"type": {strings.Repeat("x", 60<<10)}})
	wantStatus(t, r, http.StatusOK)
}

// The CSRF check decides from the session and the cookie before it reads
// the body, and never parses a multipart one: a request that sends its
// header and then only the start of a huge multipart body is answered at
// once, without hookd waiting for (or buffering) the rest.
func TestForms_MultipartIsAnsweredWithoutReadingTheBody(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dead := insertDead(t, b, "evt_multipart")
	signedIn := b.client(t)
	signedIn.signIn(accounts.RoleOperator)
	srvURL, err := url.Parse(b.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var cookies []string
	for _, ck := range signedIn.http.Jar.Cookies(srvURL) {
		cookies = append(cookies, ck.Name+"="+ck.Value)
	}

	for _, tc := range []struct {
		name   string
		cookie string
		want   int
	}{
		{"Anonymous", "", http.StatusForbidden},
		{"SignedIn", strings.Join(cookies, "; "), http.StatusUnsupportedMediaType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", srvURL.Host)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			head := fmt.Sprintf("POST /events/%s/retry HTTP/1.1\r\nHost: %s\r\n"+
				"Content-Type: multipart/form-data; boundary=xyz\r\nContent-Length: %d\r\n", dead.ID, srvURL.Host, 100<<20)
			if tc.cookie != "" {
				head += "Cookie: " + tc.cookie + "\r\n"
			}
			head += "\r\n--xyz\r\nContent-Disposition: form-data; name=\"_csrf\"\r\n\r\nsomething"
			if _, err := io.WriteString(conn, head); err != nil {
				t.Fatal(err)
			}
			// The rest of the body never comes. A server parsing it would
			// wait; the deadline only keeps a broken one from hanging the test.
			if err := conn.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer while the body is still being sent: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
	if e := eventNow(t, b, dead); e.Status != queue.StatusDead {
		t.Errorf("event is %s after refused posts, want dead", e.Status)
	}
}

// A page read with a body is refused at once, before anything parses the
// body: echo's FormValue would read a multipart one of any type up to 32
// MiB in memory, and spill the rest to disk, for a request whose filters
// are in its address.
func TestForms_AReadWithABodyIsRefusedUnread(t *testing.T) {
	t.Parallel()
	b := setup(t)
	signedIn := b.client(t)
	signedIn.signIn(accounts.RoleViewer)
	srvURL, err := url.Parse(b.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var cookies []string
	for _, ck := range signedIn.http.Jar.Cookies(srvURL) {
		cookies = append(cookies, ck.Name+"="+ck.Value)
	}
	conn, err := net.Dial("tcp", srvURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	head := fmt.Sprintf("GET /events?status=dead HTTP/1.1\r\nHost: %s\r\nCookie: %s\r\n"+
		"Content-Type: multipart/form-data; boundary=xyz\r\nContent-Length: %d\r\n\r\n"+
		"--xyz\r\nContent-Disposition: form-data; name=\"type\"\r\n\r\n", srvURL.Host, strings.Join(cookies, "; "), 90<<20)
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	// The rest of the body never comes: the answer must not wait for it.
	if err := conn.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer while the body is still being sent: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "A GET request carries no body") {
		t.Errorf("%d %q: want 400 saying a GET carries no body", resp.StatusCode, body)
	}
	// The same page without a body reads as ever.
	wantStatus(t, signedIn.get("/events?status=dead"), http.StatusOK)
}

// Visiting the sign-in page stores nothing: its form's token lives in a
// signed cookie. Only a sign-in stores a session, and signing out deletes it.
func TestLogin_PageStoresNoSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sessions := func() int {
		t.Helper()
		var n int
		if err := b.pool.QueryRow(context.Background(), `SELECT count(*) FROM sessions`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for range 20 {
		c := b.client(t)
		wantStatus(t, c.get("/login"), http.StatusOK)
		wantStatus(t, c.get("/login?next=%2Faudit"), http.StatusOK)
	}
	if n := sessions(); n != 0 {
		t.Fatalf("%d sessions stored after anonymous visits to /login, want 0", n)
	}

	// A wrong password stores nothing either.
	if _, err := b.accounts.CreateUser(context.Background(), "v@example.com", testPassword, accounts.RoleViewer); err != nil {
		t.Fatal(err)
	}
	c := b.client(t)
	c.get("/login")
	wantStatus(t, c.post("/login", url.Values{"email": {"v@example.com"}, "password": {"a guess"}}), http.StatusUnauthorized)
	if n := sessions(); n != 0 {
		t.Fatalf("%d sessions stored after a failed sign-in, want 0", n)
	}

	// The token of another browser's cookie is no good.
	other := b.client(t)
	other.get("/login")
	r := c.post("/login", url.Values{"email": {"v@example.com"}, "password": {testPassword}, "_csrf": {other.csrf}})
	wantStatus(t, r, http.StatusForbidden)

	r = c.post("/login", url.Values{"email": {"v@example.com"}, "password": {testPassword}})
	wantStatus(t, r, http.StatusSeeOther)
	c.follow(r)
	if n := sessions(); n != 1 {
		t.Fatalf("%d sessions after signing in, want 1", n)
	}
	bye := c.follow(c.post("/logout", nil))
	if got := testid(bye.doc, "flash"); got != "You are signed out." {
		t.Errorf("flash %q after sign-out", got)
	}
	if n := sessions(); n != 0 {
		t.Fatalf("%d sessions after signing out and seeing the sign-in page, want 0", n)
	}
}
