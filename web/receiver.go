package web

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/worker"
)

// lockedRetryAfter is the Retry-After, in seconds, of a delivery that found
// its event locked by another. Stripe keeps its own schedule; other senders
// get a hint that the first delivery will be done by then.
const lockedRetryAfter = "5"

// handleStripeWebhook answers a delivery from Stripe: 200 only once the
// event is processed or durably queued, 400 with the reason for a delivery
// that can never succeed, 413 for a body over the size limit, 503 for
// anything Stripe should deliver again, such as a body that found no room
// in the memory bodies may hold (bodies).
//
// Every 4xx is noted in rejections, with the client's address.
func handleStripeWebhook(logger *slog.Logger, receiver *worker.Receiver, metrics *worker.Metrics, bodies *bodyReader,
	rejections *worker.RejectionLog) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		sigHeader := req.Header.Get("Stripe-Signature")
		refuse := func(status int, err error, payload []byte) {
			rejections.Record(worker.Refusal{Err: err, HTTPStatus: status, RemoteAddr: c.RealIP(),
				Payload: payload, SigHeader: sigHeader})
		}
		payload, tooLarge, err := bodies.read(req)
		if errors.Is(err, errBodyMemoryFull) || tooLarge {
			// The rest of the body is not wanted: the answer goes out at
			// once and the connection is closed, where net/http would
			// otherwise wait to read and discard up to 256 KiB of it.
			c.Response().Header().Set(echo.HeaderConnection, "close")
		}
		switch {
		case errors.Is(err, errBodyMemoryFull):
			metrics.Received("body_memory")
			c.Response().Header().Set("Retry-After", bodyMemoryRetryAfter)
			return c.String(http.StatusServiceUnavailable, err.Error()+"\n")
		case err != nil:
			metrics.Received("bad_payload")
			refuse(http.StatusBadRequest, worker.ErrUnreadableBody, payload)
			return c.String(http.StatusBadRequest, worker.ErrUnreadableBody.Error()+"\n")
		case tooLarge:
			metrics.Received("too_large")
			refuse(http.StatusRequestEntityTooLarge, worker.ErrTooLarge, payload)
			return c.String(http.StatusRequestEntityTooLarge, worker.ErrTooLarge.Error()+"\n")
		}
		outcome, err := receiver.Receive(req.Context(), payload, sigHeader)
		status, label, body := receiveAnswer(outcome, err)
		metrics.Received(label)
		if status >= 400 && status < 500 {
			metrics.Refused(err)
			refuse(status, err, payload)
		}
		switch label {
		case "locked":
			c.Response().Header().Set("Retry-After", lockedRetryAfter)
		case "unavailable":
			var eventID string
			if ee, ok := errors.AsType[*worker.EventError](err); ok {
				eventID = ee.EventID
			}
			logger.ErrorContext(req.Context(), "webhook not stored, asking Stripe to redeliver",
				"event_id", eventID, "err", err)
		}
		return c.String(status, body+"\n")
	}
}

// receiveAnswer maps what Receive returned to the HTTP status, the metrics
// label and the body: the one place that decides what Stripe is told.
func receiveAnswer(outcome worker.Outcome, err error) (status int, label, body string) {
	switch {
	case err == nil:
		return http.StatusOK, outcome.String(), outcome.String()
	case errors.Is(err, worker.ErrBadSignature):
		return http.StatusBadRequest, "bad_signature", err.Error()
	case errors.Is(err, worker.ErrBadPayload):
		return http.StatusBadRequest, "bad_payload", err.Error()
	case errors.Is(err, queue.ErrEventLocked):
		return http.StatusServiceUnavailable, "locked", "event is being handled by another delivery"
	case errors.Is(err, worker.ErrNoSecret):
		return http.StatusServiceUnavailable, "no_secret", "no signing secret configured"
	default:
		return http.StatusServiceUnavailable, "unavailable", "temporarily unavailable"
	}
}

// handleStripeWebhookMethod refuses anything but a POST to the receiver
// with a 405, and notes it: a probe or a misconfigured sender shows up in
// the rejection log like any other refusal.
func handleStripeWebhookMethod(rejections *worker.RejectionLog) echo.HandlerFunc {
	return func(c echo.Context) error {
		rejections.Record(worker.Refusal{Err: worker.ErrMethodNotAllowed, HTTPStatus: http.StatusMethodNotAllowed,
			RemoteAddr: c.RealIP()})
		c.Response().Header().Set(echo.HeaderAllow, http.MethodPost)
		return c.String(http.StatusMethodNotAllowed, worker.ErrMethodNotAllowed.Error()+"\n")
	}
}
