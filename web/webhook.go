package web

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/telemetry"
	"github.com/hookd/hookd/internal/tracing"
	"github.com/hookd/hookd/queue"
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
func handleStripeWebhook(logger *slog.Logger, rcv *receiver.Receiver, metrics *telemetry.Metrics, bodies *bodyReader,
	rejections *telemetry.RejectionLog) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		sigHeader := req.Header.Get("Stripe-Signature")
		refuse := func(status int, err error, payload []byte) {
			rejections.Record(telemetry.Refusal{Reason: receiver.RejectReason(err), Detail: err.Error(),
				HTTPStatus: status, RemoteAddr: c.RealIP(), Payload: payload, SigHeader: sigHeader})
			tracing.Refuse(trace.SpanFromContext(req.Context()), string(receiver.RejectReason(err)), err.Error())
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
			metrics.Received(telemetry.OutcomeBodyMemory)
			c.Response().Header().Set("Retry-After", bodyMemoryRetryAfter)
			return c.String(http.StatusServiceUnavailable, err.Error()+"\n")
		case err != nil:
			metrics.Received(telemetry.OutcomeBadPayload)
			refuse(http.StatusBadRequest, receiver.ErrUnreadableBody, payload)
			return c.String(http.StatusBadRequest, receiver.ErrUnreadableBody.Error()+"\n")
		case tooLarge:
			metrics.Received(telemetry.OutcomeTooLarge)
			refuse(http.StatusRequestEntityTooLarge, receiver.ErrTooLarge, payload)
			return c.String(http.StatusRequestEntityTooLarge, receiver.ErrTooLarge.Error()+"\n")
		}
		outcome, err := rcv.Receive(req.Context(), payload, sigHeader)
		status, label, body := receiveAnswer(outcome, err)
		metrics.Received(label)
		if status >= 400 && status < 500 {
			metrics.Refused(receiver.RejectReason(err))
			refuse(status, err, payload)
		}
		switch label {
		case telemetry.OutcomeLocked:
			c.Response().Header().Set("Retry-After", lockedRetryAfter)
		case telemetry.OutcomeUnavailable:
			var eventID string
			if ee, ok := errors.AsType[*receiver.EventError](err); ok {
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
func receiveAnswer(outcome receiver.Outcome, err error) (status int, label telemetry.Outcome, body string) {
	switch {
	case err == nil:
		return http.StatusOK, outcome.Label(), outcome.String()
	case errors.Is(err, receiver.ErrBadSignature):
		return http.StatusBadRequest, telemetry.OutcomeBadSignature, err.Error()
	case errors.Is(err, receiver.ErrBadPayload):
		return http.StatusBadRequest, telemetry.OutcomeBadPayload, err.Error()
	case errors.Is(err, queue.ErrEventLocked):
		return http.StatusServiceUnavailable, telemetry.OutcomeLocked, "event is being handled by another delivery"
	case errors.Is(err, queue.ErrNotGranted):
		return http.StatusServiceUnavailable, telemetry.OutcomeUnavailable, "cannot take the event's lease yet; deliver it again shortly"
	case errors.Is(err, receiver.ErrNoSecret):
		return http.StatusServiceUnavailable, telemetry.OutcomeNoSecret, "no signing secret configured"
	default:
		return http.StatusServiceUnavailable, telemetry.OutcomeUnavailable, "temporarily unavailable"
	}
}

// handleStripeWebhookMethod refuses anything but a POST to the receiver
// with a 405, and notes it: a probe or a misconfigured sender shows up in
// the rejection log like any other refusal.
func handleStripeWebhookMethod(rejections *telemetry.RejectionLog) echo.HandlerFunc {
	return func(c echo.Context) error {
		rejections.Record(telemetry.Refusal{Reason: receiver.RejectReason(receiver.ErrMethodNotAllowed),
			Detail: receiver.ErrMethodNotAllowed.Error(), HTTPStatus: http.StatusMethodNotAllowed, RemoteAddr: c.RealIP()})
		c.Response().Header().Set(echo.HeaderAllow, http.MethodPost)
		return c.String(http.StatusMethodNotAllowed, receiver.ErrMethodNotAllowed.Error()+"\n")
	}
}
