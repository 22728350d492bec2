package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/internal/store/reconcileruns"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/worker/reconcile"
)

// Problem types beyond a plain HTTP status, which a client may tell apart
// by them; about:blank for the rest (RFC 9457).
const (
	typeBlank          = "about:blank"
	typeNotApplicable  = "urn:hookd:problem:not-applicable" // the event is not in the state the action needs
	typeKeyRunning     = "urn:hookd:problem:idempotency-key-running"
	typeKeyMismatch    = "urn:hookd:problem:idempotency-key-reused"
	typeInvalidRequest = "urn:hookd:problem:invalid-request" // errors says which field and why
)

// problemError is an answer that is a problem, as a handler or the
// middleware returns it; header is set on the answer.
type problemError struct {
	p      Problem
	header http.Header
}

func (e *problemError) Error() string { return e.p.Detail }

// problem is the problem of status, of type typ ("" for about:blank),
// saying detail.
func problem(status int, typ, detail string, fields ...FieldProblem) *problemError {
	p := Problem{Type: typ, Title: http.StatusText(status), Status: status, Detail: detail}
	if p.Type == "" {
		p.Type = typeBlank
	}
	if len(fields) > 0 {
		p.Errors = &fields
	}
	return &problemError{p: p, header: http.Header{}}
}

// HandleError answers every error under /api/v1 with a problem
// (application/problem+json), echo's own 404 and 405 included, and logs
// hookd's own failures.
func HandleError(logger *slog.Logger) echo.HTTPErrorHandler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		pe := problemOf(err, c)
		if pe.p.Status >= http.StatusInternalServerError {
			logger.ErrorContext(c.Request().Context(), "api request failed", "method", c.Request().Method,
				"path", c.Request().URL.Path, "status", pe.p.Status, "err", err)
		}
		if werr := writeProblem(c.Response(), pe); werr != nil {
			logger.WarnContext(c.Request().Context(), "write problem", "err", werr)
		}
	}
}

func writeProblem(w *echo.Response, pe *problemError) error {
	for k, v := range pe.header {
		w.Header()[k] = v
	}
	body, err := json.Marshal(pe.p)
	if err != nil {
		return err
	}
	w.Header().Set(echo.HeaderContentType, "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(pe.p.Status)
	_, err = w.Write(body)
	return err
}

// problemOf maps err to its problem.
func problemOf(err error, c echo.Context) *problemError {
	var (
		pe         *problemError
		invalid    *actions.InvalidError
		notOnQueue *actions.NotOnQueueError
		notFound   *actions.NotFoundError
		conflict   *actions.ConflictError
		slow       *queue.ReadTimeoutError
		he         *echo.HTTPError
		stripeErr  *stripeapi.APIError
	)
	switch {
	case errors.As(err, &pe):
		return pe
	case errors.As(err, &invalid):
		return problem(http.StatusBadRequest, typeInvalidRequest, invalid.Detail, FieldProblem{Field: invalid.Field, Detail: invalid.Detail})
	case errors.As(err, &notOnQueue):
		return problem(http.StatusNotFound, "", notOnQueue.Error())
	case errors.As(err, &notFound):
		return problem(http.StatusNotFound, "", notFound.Error())
	case errors.As(err, &conflict):
		return problem(http.StatusConflict, typeNotApplicable, "Nothing was changed: "+conflict.Detail)
	case errors.Is(err, queue.ErrNotFound):
		return problem(http.StatusNotFound, "", fmt.Sprintf("No event %q is on the queue: the id is an event id (evt_...) or a queue id.", c.Param("id")))
	case errors.Is(err, queue.ErrPayloadErased):
		return problem(http.StatusConflict, typeNotApplicable, "The event was not retried: "+queue.ErrPayloadErased.Error()+".")
	case errors.Is(err, actions.ErrReconcileOff):
		return problem(http.StatusNotFound, "", actions.ReconcileOffDetail)
	case errors.Is(err, reconcileruns.ErrRunning):
		return problem(http.StatusConflict, typeNotApplicable, "Another reconcile run is in progress; nothing was changed. Try again when it ends.")
	case errors.Is(err, reconcile.ErrNotReceived):
		return problem(http.StatusUnprocessableEntity, typeNotApplicable, "Nothing was pulled: "+err.Error()+".")
	case errors.Is(err, actions.ErrNoStripeObject):
		return problem(http.StatusUnprocessableEntity, typeNotApplicable, "Nothing was fetched: "+err.Error()+".")
	case errors.Is(err, actions.ErrStripeOff):
		return problem(http.StatusConflict, typeNotApplicable, "Nothing was fetched: "+err.Error()+".")
	case errors.As(err, &stripeErr):
		return problem(http.StatusBadGateway, "", "Stripe's API did not answer as asked, so nothing was changed: "+err.Error())
	case errors.Is(err, queue.ErrNotGranted):
		pe := problem(http.StatusServiceUnavailable, "", "Nothing was done: "+err.Error()+". Try again in a moment.")
		pe.header.Set("Retry-After", "5")
		return pe
	case errors.As(err, &slow):
		pe := problem(http.StatusServiceUnavailable, "", fmt.Sprintf("The read took longer than %s, so it was stopped; "+
			"narrow the filter, or try again in a moment.", slow.Limit))
		pe.header.Set("Retry-After", "5")
		return pe
	case errors.As(err, &he):
		return httpProblem(he, c)
	}
	return problem(http.StatusInternalServerError, "", "Something went wrong on hookd's side. It has been logged; try again in a moment.")
}

// httpProblem is echo's own error as a problem: its 404 and 405, and the
// generated code's 400s for parameters it cannot read.
func httpProblem(he *echo.HTTPError, c echo.Context) *problemError {
	r := c.Request()
	switch he.Code {
	case http.StatusNotFound:
		return problem(he.Code, "", fmt.Sprintf("%s is not a path of this API; its operations are listed in %s/openapi.json.", r.URL.Path, Prefix))
	case http.StatusMethodNotAllowed:
		return problem(he.Code, "", fmt.Sprintf("%s is not an operation of %s; its operations are listed in %s/openapi.json.",
			r.Method, r.URL.Path, Prefix))
	}
	msg := http.StatusText(he.Code)
	if s, ok := he.Message.(string); ok {
		msg = s
	}
	if he.Code >= http.StatusInternalServerError {
		msg = "Something went wrong on hookd's side. It has been logged; try again in a moment."
	}
	return problem(he.Code, "", msg)
}
