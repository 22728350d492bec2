// Package views renders the dashboard's pages with templ. Its components only
// format what the handlers give them: they never fetch data, and every value
// they show goes through templ's escaping.
package views

import (
	"time"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/queue"
)

// Page is what the layout of every page needs.
type Page struct {
	Title string
	// Nav is the nav item to mark as current: "overview", "dead",
	// "pending", "failures", "rejections", "destinations", "replays",
	// "audit", "accounts" or "".
	Nav string
	// User is the signed-in account; nil on the sign-in and error pages
	// shown without a session.
	User *Account
	// CSRF is the token every form carries as _csrf.
	CSRF string
	// Flash is a one-time message about the last action; Error an error
	// about this request.
	Flash string
	Error string
	// Now is when the page is rendered, to show times as ages.
	Now time.Time
	// Stalled, when set, says the retry loop has stalled: a banner on
	// every page, since nothing pending moves until it runs again.
	Stalled string
	// Replicas, when set, says the live replicas apply different
	// destinations: a banner on every page, since where an event goes
	// then depends on which replica Stripe reaches.
	Replicas string
	// Delivery is whether delivery to the app is held, by a person or the
	// circuit breaker: a banner on every page while it is.
	Delivery queue.DeliveryControl
	// DemoBackoff is set while the retry schedule runs in seconds for the
	// demo; every page then says so, so nobody mistakes it for production.
	DemoBackoff bool
	// Contradictions say where an endpoint's declaration (HOOKD_ENDPOINTS)
	// contradicts what arrives through it: a banner on the overview and on
	// the endpoint's event list.
	Contradictions []string
	// TraceURL (HOOKD_TRACE_URL) turns an attempt's trace id into a link
	// to the tracing backend, the id in place of {trace_id}; "" shows the
	// id alone.
	TraceURL string
}

// Can reports whether the signed-in account may act as role.
func (p Page) Can(role accounts.Role) bool {
	return p.User != nil && p.User.Role.Allows(role)
}

// Account is what a page shows of a dashboard account. It has no password
// hash, so no page can show one.
type Account struct {
	ID        int64
	Email     string
	Role      accounts.Role
	CreatedAt time.Time
	// FromProvider is set for an account of the identity provider, whose
	// role its groups set at every sign-in.
	FromProvider bool
	// LastSignInAt is nil until the account first signs in.
	LastSignInAt *time.Time
}
