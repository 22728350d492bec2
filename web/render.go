package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/static"
	"github.com/hookd/hookd/views"
	"github.com/hookd/hookd/web/api"
	"github.com/hookd/hookd/worker"
)

// render renders a page into a buffer first and sends it only when that
// worked, so a failing render becomes a whole error page, never half a page.
func render(c echo.Context, status int, page templ.Component) error {
	buf := templ.GetBuffer()
	defer templ.ReleaseBuffer(buf)
	if err := page.Render(c.Request().Context(), buf); err != nil {
		return err
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// signedIn is what pages show of the signed-in account; nil without one.
func signedIn(c echo.Context) *views.Account {
	u := currentUser(c)
	if u == nil {
		return nil
	}
	a := accountView(*u)
	return &a
}

// page returns what the layout needs for this request, taking the flash
// message out of the session: it is shown once.
func (d *dashboard) page(c echo.Context, title, nav string) views.Page {
	return d.pageWith(c, title, nav, d.opts.Control.State())
}

// pageWith is page with delivery control as the handler read it, for the
// pages that also show what it holds: the banner and they then agree.
func (d *dashboard) pageWith(c echo.Context, title, nav string, delivery queue.DeliveryControl) views.Page {
	return views.Page{
		Title: title,
		Nav:   nav,
		User:  signedIn(c),
		CSRF:  sessionCSRF(c),
		Flash: session(c).PopString(c.Request().Context(), sessFlash),
		Now:   time.Now(),

		DemoBackoff: d.store.DemoBackoff(),
		Delivery:    delivery,
		Stalled:     d.stalledBanner(c),
		Replicas:    d.replicasBanner(c),
		TraceURL:    d.opts.TraceURL,
	}
}

// replicasBannerMaxAge is how old the replicas' destinations a page's
// banner shows may be: they change at a start or a SIGHUP, and a page load
// must not cost a read of every replica's row.
const replicasBannerMaxAge = 5 * time.Second

// replicaSpread is the last read of which destinations the live replicas
// apply, shared by every page for replicasBannerMaxAge. Its mutex is held
// across a read, so that pages loaded at once wait for one read rather
// than each making their own.
type replicaSpread struct {
	mu     sync.Mutex
	readAt time.Time
	banner string
}

// replicasBanner is the banner every page shows while the live replicas
// apply different destinations, or "". A failure to tell is logged and
// shows none, and is kept as long as a read: the page's own queries say
// whether the database answers.
func (d *dashboard) replicasBanner(c echo.Context) string {
	if signedIn(c) == nil {
		return ""
	}
	r := &d.replicas
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.readAt.IsZero() && time.Since(r.readAt) < replicasBannerMaxAge {
		return r.banner
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), 2*time.Second)
	defer cancel()
	hashes, err := d.reads.ReplicaDestinationHashes(ctx)
	r.readAt, r.banner = time.Now(), ""
	if err != nil {
		d.logger.WarnContext(ctx, "cannot tell whether the replicas apply the same destinations", "err", err)
		return ""
	}
	if groups, _ := queue.GroupDestinationHashes(hashes); len(groups) > 1 {
		parts := make([]string, len(groups))
		for i, g := range groups {
			parts[i] = fmt.Sprintf("%d %s destinations %s", g.Replicas,
				map[bool]string{true: "applies", false: "apply"}[g.Replicas == 1], queue.ShortHash(g.Hash))
		}
		r.banner = "Replicas apply different destinations: " + strings.Join(parts, ", ") + ". Each event goes to the " +
			"destinations of whichever replica Stripe reaches. Give every replica the same `HOOKD_DESTINATIONS_FILE` " +
			"and send the ones that differ `SIGHUP`; `hookd doctor` says which one its configuration gives."
	}
	return r.banner
}

// stalledBanner is the banner every page shows while the retry loop is
// stalled, or "". A failure to tell is logged and shows none: the page's
// own queries say whether the database answers.
func (d *dashboard) stalledBanner(c echo.Context) string {
	if signedIn(c) == nil {
		return ""
	}
	after := worker.RetrierStalledAfter(d.opts.RetryInterval)
	stalled, last, now, err := d.reads.RetryLoopStall(c.Request().Context(), after)
	switch {
	case err != nil:
		d.logger.WarnContext(c.Request().Context(), "cannot tell whether the retry loop is stalled", "err", err)
		return ""
	case !stalled:
		return ""
	case last == nil:
		return "No retry loop has ever run, and events wait for one: nothing on the queue is retried. " +
			"Is hookd serve running?"
	}
	return "The retry loop has not looked for due events for " + views.Age(*last, now) + " (since " +
		views.Absolute(*last) + "): nothing on the queue is retried. Check hookd's log on every replica."
}

// flash keeps msg in the session for the next page shown.
func flash(c echo.Context, msg string) {
	session(c).Put(c.Request().Context(), sessFlash, msg)
}

// handleError is the one place errors become responses. A missing row is a
// 404 page, an echo.HTTPError its own status with its message, anything
// else is logged once, with the request id, and shown as a plain 500.
func (d *dashboard) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	if api.Serves(c.Request().URL.Path) {
		d.apiErrors(err, c)
		return
	}
	status, msg := d.errorAnswer(c, err)
	// Machines get plain text; the error pages are for people.
	if path := c.Request().URL.Path; strings.HasPrefix(path, "/webhooks/") || strings.HasPrefix(path, "/static/") ||
		path == "/metrics" || path == "/healthz" || path == "/readyz" {
		_ = c.String(status, msg+"\n")
		return
	}
	// An error is about this moment; nobody should be shown it again.
	noStore(c)
	p := views.Page{Title: titleFor(status), User: signedIn(c), Now: time.Now(), DemoBackoff: d.store.DemoBackoff()}
	if p.User != nil {
		// The layout's sign-out form needs the token, and its banner says
		// whether delivery is held, as on every page. Delivery control is
		// this replica's copy in memory: reading it cannot fail, so the
		// banner never costs the error page.
		p.CSRF = sessionCSRF(c)
		p.Delivery = d.opts.Control.State()
	}
	if rerr := render(c, status, views.ErrorPage(p, status, msg)); rerr != nil {
		d.logger.ErrorContext(c.Request().Context(), "render error page", "err", rerr)
		_ = c.String(status, msg+"\n")
	}
}

// errorAnswer maps err to the status and the message its answer gives,
// and logs it when it is hookd's failure: a 5xx, once, with the request
// id. A read stopped at its time limit is logged as a warning instead.
func (d *dashboard) errorAnswer(c echo.Context, err error) (status int, msg string) {
	status, msg = http.StatusInternalServerError, "Something went wrong on our side. It has been logged; try again in a moment."
	var he *echo.HTTPError
	var slow *queue.ReadTimeoutError
	switch {
	case errors.As(err, &slow):
		// A page whose query ran past HOOKD_DASHBOARD_TIMEOUT: the
		// database stopped it so that it holds no connection and no core
		// the receiver needs. Not hookd's fault, and not worth a 500.
		status, msg = http.StatusServiceUnavailable, fmt.Sprintf("This view took longer than %s to read, so it was stopped "+
			"to keep deliveries fast. Narrow the filter (an event type, a longer error text) and try again.", slow.Limit)
		d.logger.WarnContext(c.Request().Context(), "dashboard read stopped at its time limit (HOOKD_DASHBOARD_TIMEOUT)",
			"limit", slow.Limit, "path", c.Request().URL.Path, "query", c.Request().URL.RawQuery,
			"request_id", c.Response().Header().Get(echo.HeaderXRequestID))
	case errors.Is(err, queue.ErrNotFound):
		status, msg = http.StatusNotFound, "There is no such event on the queue. It may have succeeded since and left the queue."
	case errors.As(err, &he):
		status = he.Code
		switch m := he.Message.(type) {
		case string:
			msg = m
		default:
			msg = http.StatusText(status) + "."
		}
		// The router's own 404 says only "Not Found"; a handler's says
		// which thing is missing and why, and is kept.
		if status == http.StatusNotFound && (msg == http.StatusText(status) || msg == http.StatusText(status)+".") {
			msg = "There is no page at this address."
		}
	}
	if status >= http.StatusInternalServerError && slow == nil {
		d.logger.ErrorContext(c.Request().Context(), "request failed", "err", err,
			"method", c.Request().Method, "path", c.Request().URL.Path,
			"request_id", c.Response().Header().Get(echo.HeaderXRequestID))
	}
	return status, msg
}

func titleFor(status int) string {
	switch status {
	case http.StatusNotFound:
		return "Not found"
	case http.StatusForbidden:
		return "Not allowed"
	case http.StatusBadRequest:
		return "Bad request"
	}
	if status >= 500 {
		return "Something went wrong"
	}
	return http.StatusText(status)
}

// handleStatic serves the embedded stylesheet, htmx and the favicon.
func handleStatic() echo.HandlerFunc {
	files := http.StripPrefix("/static/", http.FileServerFS(static.FS))
	return func(c echo.Context) error {
		// The files change only with the binary. Embedded files have no
		// modification time to revalidate against, so cache briefly.
		c.Response().Header().Set("Cache-Control", "public, max-age=300")
		files.ServeHTTP(c.Response(), c.Request())
		return nil
	}
}

// noStore keeps browsers and proxies from keeping a copy of the response:
// dashboard pages show payloads with customer data, and an error page is
// about its moment.
func noStore(c echo.Context) {
	c.Response().Header().Set("Cache-Control", "no-store")
}

// pageParam is the list page ?page= asks for, counted from 1; anything
// else is the first page.
func pageParam(c echo.Context) int {
	n, err := strconv.Atoi(c.QueryParam("page"))
	if err != nil || n < 1 {
		return 1
	}
	return n
}
