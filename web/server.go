// Package web is hookd's HTTP surface: the Stripe receiver, the operations
// endpoints and the support dashboard. It stays thin: the receiver's pipeline
// lives in worker, every query in queue, every page in views.
//
// Its guarantee to Stripe: a 2xx means the event was processed or is durably
// queued; anything else is a 4xx saying why it was refused, or a 503 asking
// Stripe to deliver it again.
package web

import (
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/queue"
)

// NewServer returns the handler serving every route of hookd.
func NewServer(logger *slog.Logger, store *queue.Store) http.Handler {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	addRoutes(e, logger, store)
	return e
}
