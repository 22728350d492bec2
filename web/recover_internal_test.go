package web

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// A handler that panics answers 500 through the error handler, and the
// panic is logged with its stack, instead of the connection being dropped.
func TestRecoverPanics_AnswersAndLogs(t *testing.T) {
	var logs bytes.Buffer
	e := echo.New()
	e.Use(recoverPanics(slog.New(slog.NewTextHandler(&logs, nil))))
	handled := false
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		handled = true
		_ = c.String(http.StatusInternalServerError, "error page: "+err.Error())
	}
	e.GET("/boom", func(echo.Context) error { panic("nil map") })

	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/boom", nil))
	if rec.Code != http.StatusInternalServerError || !handled || rec.Body.String() != "error page: nil map" {
		t.Fatalf("got %d %q (error handler ran: %v), want 500 written by the error handler", rec.Code, rec.Body, handled)
	}
	for _, want := range []string{"handler panicked", "path=/boom", "nil map", "recover_internal_test.go"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log %q lacks %q", logs.String(), want)
		}
	}
}
