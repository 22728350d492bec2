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
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/worker"
)

// NewServer returns the handler serving every route of hookd: receiver
// hands webhooks to the pipeline, metrics counts them, gatherer is what
// /metrics serves, and maxBody is the largest webhook body accepted.
func NewServer(logger *slog.Logger, store *queue.Store, receiver *worker.Receiver,
	metrics *worker.Metrics, gatherer prometheus.Gatherer, maxBody int64) http.Handler {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	addRoutes(e, logger, store, receiver, metrics, gatherer, maxBody)
	return e
}
