package web

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/queue"
)

// handleHealthz answers 200 while the process runs.
func handleHealthz() echo.HandlerFunc {
	return func(c echo.Context) error {
		return c.String(http.StatusOK, "ok\n")
	}
}

// handleReadyz answers 200 while the database answers, 503 otherwise, so a
// load balancer stops sending webhooks to a replica that cannot store them.
func handleReadyz(logger *slog.Logger, store *queue.Store) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
		defer cancel()
		if err := store.Ping(ctx); err != nil {
			logger.WarnContext(ctx, "not ready", "err", err)
			return c.String(http.StatusServiceUnavailable, "database unreachable\n")
		}
		return c.String(http.StatusOK, "ready\n")
	}
}
