package web

import (
	"log/slog"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/worker"
)

// addRoutes maps the entire HTTP surface of hookd.
func addRoutes(e *echo.Echo, logger *slog.Logger, store *queue.Store, receiver *worker.Receiver,
	metrics *worker.Metrics, gatherer prometheus.Gatherer, maxBody int64) {
	e.GET("/healthz", handleHealthz())
	e.GET("/readyz", handleReadyz(logger, store))
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{})))
	e.POST("/webhooks/stripe", handleStripeWebhook(logger, receiver, metrics, maxBody))
}
