package web

import (
	"cmp"
	"log/slog"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/activity"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/internal/store/rejections"
	"github.com/hookd/hookd/internal/store/tokens"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/web/api"
)

// perPage is the length of the event lists and the audit log.
const perPage = 50

// dashboard holds what the dashboard's handlers share.
type dashboard struct {
	logger *slog.Logger
	// store is the queue for the actions people take; reads, for what
	// the pages show. counts and rejections are read for the pages too.
	store    *queue.Store
	reads    *queue.Store
	accounts *accounts.Store
	tokens   *tokens.Store
	audit    *audit.Log
	// actions are the actions the dashboard shares with /api/v1, whose
	// errors (problems, under its path, served here or not) apiErrors
	// answers.
	actions    *actions.Actions
	apiErrors  echo.HTTPErrorHandler
	counts     *activity.Store
	rejections *rejections.Store
	opts       Options
	sessions   sessionManagers
	// cookies names the cookies and their paths (__Host- with https).
	cookies cookiePolicy
	// passwordChecks holds a slot per password check running.
	passwordChecks *checkSlots
	// formKeys signs the sign-in form's token and checks it.
	formKeys *accounts.KeyRing
	// deviceKeys signs the cookies of known browsers (signin.go).
	deviceKeys *accounts.KeyRing
	// replicas is the last read of the destinations the replicas apply,
	// for every page's banner.
	replicas replicaSpread
}

func newDashboard(opts Options) *dashboard {
	opts = withDefaults(opts)
	return &dashboard{
		logger:     opts.Logger.With("component", "dashboard"),
		store:      opts.Stores.Queue,
		reads:      cmp.Or(opts.Stores.Reads, opts.Stores.Queue),
		accounts:   opts.Stores.Accounts,
		tokens:     opts.Stores.Tokens,
		audit:      opts.Stores.Audit,
		actions:    opts.Actions,
		apiErrors:  api.HandleError(opts.Logger),
		counts:     opts.Stores.Activity,
		rejections: opts.Stores.Rejections,
		opts:       opts,
		sessions: newSessionManagers(opts.Sessions, opts.SecureCookies || isHTTPS(opts.PublicURL), opts.SessionMaxAge,
			cookiePolicy{hostOnly: isHTTPS(opts.PublicURL)}),
		cookies: cookiePolicy{hostOnly: isHTTPS(opts.PublicURL)},

		passwordChecks: newCheckSlots(maxPasswordChecks),
		formKeys:       opts.FormKeys,
		deviceKeys:     deviceKeys(opts),
	}
}
