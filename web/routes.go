package web

import (
	"log/slog"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/queue"
)

// addRoutes maps the entire HTTP surface of hookd.
func addRoutes(e *echo.Echo, logger *slog.Logger, store *queue.Store) {
	e.GET("/healthz", handleHealthz())
	e.GET("/readyz", handleReadyz(logger, store))
}
