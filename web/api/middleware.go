package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/store/idempotency"
	"github.com/hookd/hookd/internal/store/tokens"
)

// maxBody bounds a request's body: the API's bodies are a few fields.
const maxBody = 64 << 10

// middleware is each operation's chain, by its method and echo path: the token (a
// 401), its rate (429) and scope (403), the request against the document
// (400), and a POST's Idempotency-Key. Adding an operation to
// openapi.yaml, with its x-hookd-scope, gives it its chain.
func (s *server) middleware() map[string][]echo.MiddlewareFunc {
	doc, err := document()
	if err != nil {
		panic(err)
	}
	ops, err := operations(doc)
	if err != nil {
		panic(err)
	}
	chains := map[string][]echo.MiddlewareFunc{}
	for _, op := range ops {
		var chain []echo.MiddlewareFunc
		if op.scope != scopeNone {
			chain = append(chain, s.authenticate, s.limit, requireScope(tokens.Scope(op.scope)))
		}
		chain = append(chain, validate(doc, op))
		if op.method == http.MethodPost {
			chain = append(chain, s.idempotent)
		}
		chains[op.method+" "+echoPath(op.path)] = chain
	}
	return chains
}

// validate checks the request against op in the document: every
// parameter and the body, each problem a field of the 400's errors.
func validate(doc *openapi3.T, op operation) echo.MiddlewareFunc {
	route := &routers.Route{Spec: doc, Path: op.path, PathItem: op.item, Method: op.method, Operation: op.op}
	opts := &openapi3filter.Options{MultiError: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.ContentLength > maxBody {
				return problem(http.StatusRequestEntityTooLarge, "", fmt.Sprintf("The body is larger than %d bytes.", maxBody))
			}
			// A body sent without its length is bounded as it is read.
			r.Body = http.MaxBytesReader(c.Response(), r.Body, maxBody)
			params := map[string]string{}
			for _, name := range c.ParamNames() {
				params[name] = c.Param(name)
			}
			in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: opts}
			if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
				fields := fieldProblems(err)
				return problem(http.StatusBadRequest, typeInvalidRequest, fields[0].Detail, fields...)
			}
			return next(c)
		}
	}
}

// fieldProblems lists what err, openapi3filter's, found, one entry per
// field: a parameter by its name, a body field by its JSON path.
func fieldProblems(err error) []FieldProblem {
	var out []FieldProblem
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case openapi3.MultiError:
			for _, inner := range e {
				walk(inner)
			}
		case *openapi3filter.RequestError:
			switch {
			case e.Parameter != nil:
				out = append(out, FieldProblem{Field: e.Parameter.Name, Detail: e.Parameter.Name + ": " + reason(e)})
			case e.Err != nil:
				walk(e.Err)
			default:
				out = append(out, FieldProblem{Field: "body", Detail: "body: " + e.Reason})
			}
		case *openapi3.SchemaError:
			field := strings.Join(e.JSONPointer(), ".")
			if field == "" {
				field = "body"
			}
			out = append(out, FieldProblem{Field: field, Detail: field + ": " + e.Reason})
		default:
			out = append(out, FieldProblem{Field: "request", Detail: err.Error()})
		}
	}
	walk(err)
	return out
}

// reason is why a parameter was refused: its schema's reason, when it
// broke its schema.
func reason(e *openapi3filter.RequestError) string {
	var schemaErr *openapi3.SchemaError
	switch {
	case errors.As(e.Err, &schemaErr):
		return schemaErr.Reason
	case e.Reason != "":
		return e.Reason
	case e.Err != nil:
		return e.Err.Error()
	}
	return "not valid"
}

// idempotent keeps the answer of a POST that carries an Idempotency-Key,
// 24 hours for its token (internal/store/idempotency): the same key again
// gets that answer, with Idempotent-Replayed: true; the same key with
// another method, path or body a 422; the same key while the first
// request runs a 409. A request that fails on hookd's side (a 5xx) keeps
// nothing, so the key may be tried again.
func (s *server) idempotent(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		key := c.Request().Header.Get("Idempotency-Key")
		if key == "" {
			return next(c)
		}
		token := tokenOf(c).ID
		hash, err := requestHash(c)
		if err != nil {
			return err
		}
		ctx := c.Request().Context()
		kept, err := s.opts.Idempotency.Claim(ctx, token, key, hash)
		switch {
		case errors.Is(err, idempotency.ErrRunning):
			return problem(http.StatusConflict, typeKeyRunning, "A request with this Idempotency-Key is still running; "+
				"send it again once it is answered, to get its answer.", FieldProblem{Field: "Idempotency-Key", Detail: "in use"})
		case errors.Is(err, idempotency.ErrMismatch):
			return problem(http.StatusUnprocessableEntity, typeKeyMismatch, "This Idempotency-Key was used for another request "+
				"(another method, path or body) in the last 24 hours; use a new key for a new request.",
				FieldProblem{Field: "Idempotency-Key", Detail: "used for another request"})
		case err != nil:
			return err
		case kept != nil:
			c.Response().Header().Set("Idempotent-Replayed", "true")
			return c.Blob(kept.Status, kept.ContentType, kept.Body)
		}
		return s.runHeld(c, token, key, next)
	}
}

// runHeld runs next holding key, and keeps its answer, or lets the key
// go when hookd failed.
func (s *server) runHeld(c echo.Context, token int64, key string, next echo.HandlerFunc) error {
	rec := &recorder{ResponseWriter: c.Response().Writer}
	c.Response().Writer = rec
	if err := next(c); err != nil {
		c.Error(err) // answered here, so that the answer is kept
	}
	// A client gone must not leave the key held.
	ctx := context.WithoutCancel(c.Request().Context())
	status := c.Response().Status
	if status >= http.StatusInternalServerError {
		return s.opts.Idempotency.Release(ctx, token, key)
	}
	return s.opts.Idempotency.Finish(ctx, token, key, idempotency.Answer{
		Status: status, ContentType: c.Response().Header().Get(echo.HeaderContentType), Body: rec.body.Bytes()})
}

// requestHash is what tells one request from another under one key.
func requestHash(c echo.Context) ([]byte, error) {
	r := c.Request()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxBody {
		return nil, problem(http.StatusRequestEntityTooLarge, "", fmt.Sprintf("The body is larger than %d bytes.", maxBody))
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	h := sha256.New()
	fmt.Fprintf(h, "%s %s?%s\n", r.Method, r.URL.Path, r.URL.RawQuery)
	h.Write(body)
	return h.Sum(nil), nil
}

// recorder keeps a copy of the body written through it.
type recorder struct {
	http.ResponseWriter
	body bytes.Buffer
}

func (r *recorder) Write(b []byte) (int, error) {
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}
