package main

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hookd/hookd/internal/doctor"
	"github.com/hookd/hookd/internal/tracing"
)

func TestDoctor_TracesLine(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
		mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/refuses") {
			http.Error(w, "no", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(collector.Close)
	cases := []struct {
		name   string
		export tracing.Export
		status doctor.Status
		detail string
	}{
		{"Off", tracing.Export{}, doctor.OK, "off: OTEL_EXPORTER_OTLP_ENDPOINT is not set"},
		{"CollectorTakesTheSpan", tracing.Export{Endpoint: collector.URL}, doctor.OK, "exported over OTLP/HTTP to " + collector.URL},
		{"CollectorRefuses", tracing.Export{TracesEndpoint: collector.URL + "/refuses/v1/traces"}, doctor.Warn,
			"the collector at " + collector.URL + "/refuses/v1/traces refused a test span"},
	}
	for _, c := range cases {
		r := traceCheck(t.Context(), c.export)
		if r.Status != c.status || !strings.HasPrefix(r.Detail, c.detail) {
			t.Errorf("%s: %s %q, want %s %q...", c.name, r.Status, r.Detail, c.status, c.detail)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"POST /v1/traces application/x-protobuf", "POST /refuses/v1/traces application/x-protobuf"}
	if !slices.Equal(got, want) {
		t.Errorf("collector received %q, want %q", got, want)
	}
}
