package config

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hookd/hookd/internal/tracing"
)

func TestParseConfig_Traces(t *testing.T) {
	t.Parallel()
	const collector = "http://127.0.0.1:4318"
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want tracing.Export
	}{
		{"OffByDefault", nil, nil, tracing.Export{}},
		{"OnWithTheEndpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector}, nil, tracing.Export{Endpoint: collector}},
		{"OnWithTheFlag", nil, []string{"-otlp-endpoint", collector}, tracing.Export{Endpoint: collector}},
		{"OnWithTheTracesEndpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector + "/v1/traces"}, nil,
			tracing.Export{TracesEndpoint: collector + "/v1/traces"}},
		{"OffWhenTheSDKIsDisabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector, "OTEL_SDK_DISABLED": "true"}, nil,
			tracing.Export{}},
		{"OffWithNoExporter", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector, "OTEL_TRACES_EXPORTER": "none"}, nil,
			tracing.Export{}},
		{"HTTPProtobufIsAccepted", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, nil,
			tracing.Export{Endpoint: collector}},
		// Unused while tracing is off: a setting of another program's
		// shared environment stops nothing.
		{"ProtocolIgnoredWhenOff", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, nil, tracing.Export{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse("serve", c.args, envOf(c.env), new(bytes.Buffer))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Trace != c.want || cfg.Trace.On() != (c.want != tracing.Export{}) {
				t.Errorf("Trace = %+v (on %v), want %+v", cfg.Trace, cfg.Trace.On(), c.want)
			}
		})
	}
}

func TestParseConfig_TraceSettingsRefusedNameTheVariable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"EndpointNotAURL", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "127.0.0.1:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT: not an absolute http(s) URL"},
		{"GRPC", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			`OTEL_EXPORTER_OTLP_PROTOCOL: hookd sends OTLP over HTTP, http/protobuf, only (got "grpc")`},
		{"OtherExporter", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "zipkin"},
			`OTEL_TRACES_EXPORTER: hookd exports traces with otlp, or none (got "zipkin")`},
		{"TraceURLWithoutTheID", map[string]string{"HOOKD_TRACE_URL": "https://tempo.example/trace/"},
			"HOOKD_TRACE_URL: must hold {trace_id}, where the trace's id goes"},
		{"TraceURLNotAURL", map[string]string{"HOOKD_TRACE_URL": "tempo/{trace_id}"}, "HOOKD_TRACE_URL: not an absolute http(s) URL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("serve", nil, envOf(c.env), new(bytes.Buffer))
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("error = %v, want one starting %q", err, c.want)
			}
		})
	}
}
