package e2etest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// JaegerVersion is the Jaeger the trace tests run; .ci/jaeger.sh builds
// the same.
const JaegerVersion = "v1.76.0"

// Jaeger is a Jaeger all-in-one a test started for itself: in memory,
// taking OTLP over HTTP at OTLP and serving its query API at Query, on ports of its own, so tests running at once never read each
// other's traces. It stops when the test ends.
type Jaeger struct {
	// OTLP is the base URL of the OTLP/HTTP receiver, for
	// OTEL_EXPORTER_OTLP_ENDPOINT; traces go to its /v1/traces.
	OTLP string
	// Query is the base URL of the query API (/api/...).
	Query string
	log   *SyncBuffer
}

// jaegerConfig is the all-in-one configuration with only what the tests
// use: the OTLP/HTTP receiver, memory storage and the query service,
// every port given, and no metrics endpoint of its own
// (its default port would be one for every Jaeger on the machine).
// Without the batch processor a span is in storage as soon as it arrives.
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: %q
    grpc:
      endpoint: %q
receivers:
  otlp:
    protocols:
      http:
        endpoint: %q
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// JaegerDir is where .ci/jaeger.sh puts the binary (jaeger):
// HOOKD_JAEGER_DIR, as the script reads it, or its default.
func JaegerDir() (string, error) {
	if dir := os.Getenv("HOOKD_JAEGER_DIR"); dir != "" {
		return dir, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".cache", "hookd", "jaeger-"+JaegerVersion), nil
}

// StartJaeger starts a Jaeger of the test's own and waits until it
// answers. Without the binary the test is skipped, saying how to build
// it, except with CI=true, where it fails. A port
// picked by listening on :0 can be taken before Jaeger binds it; Jaeger
// then exits at once, and other ports are tried.
func StartJaeger(t testing.TB) *Jaeger {
	t.Helper()
	dir, err := JaegerDir()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "jaeger")
	if _, err := os.Stat(bin); err != nil {
		msg := fmt.Sprintf("Jaeger %s is not built (%s): run .ci/jaeger.sh (make jaeger; make test does)", JaegerVersion, bin)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	for try := 1; ; try++ {
		j, err := startJaeger(t, bin)
		if err == nil {
			return j
		}
		if !strings.Contains(j.log.String(), "address already in use") || try == 3 {
			t.Fatalf("start Jaeger: %v\nits log:\n%s", err, j.log)
		}
	}
}

func startJaeger(t testing.TB, bin string) (*Jaeger, error) {
	otlp, query, grpc := freeAddr(t), freeAddr(t), freeAddr(t)
	j := &Jaeger{OTLP: "http://" + otlp, Query: "http://" + query, log: &SyncBuffer{}}
	config := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, jaegerConfig, query, grpc, otlp), 0o600); err != nil {
		return j, err
	}
	cmd := exec.Command(bin, "--config", "file:"+config)
	cmd.Stdout, cmd.Stderr = j.log, j.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return j, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}

	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			return j, fmt.Errorf("Jaeger exited before it answered (%v)", err)
		case <-deadline:
			stop()
			return j, fmt.Errorf("Jaeger did not answer on %s within 30 s", j.Query)
		case <-tick.C:
		}
		if answers(client, j.Query+"/api/services") && answers(client, j.OTLP+"/v1/traces") {
			t.Cleanup(func() {
				stop()
				if t.Failed() {
					t.Logf("Jaeger's log:\n%s", j.log)
				}
			})
			return j, nil
		}
	}
}

// answers says whether u answers HTTP at all, with any status: the OTLP
// receiver refuses a GET, which is enough to know it listens.
func answers(client *http.Client, u string) bool {
	resp, err := client.Get(u)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode < 500
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer ln.Close()
	return "127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// JaegerTrace is a trace as Jaeger's query API (/api/traces) answers it.
type JaegerTrace struct {
	TraceID   string       `json:"traceID"`
	Spans     []JaegerSpan `json:"spans"`
	Processes map[string]struct {
		ServiceName string      `json:"serviceName"`
		Tags        []JaegerTag `json:"tags"`
	} `json:"processes"`
}

// JaegerSpan is a span of a JaegerTrace: its parent is a CHILD_OF
// reference, and each of its links a FOLLOWS_FROM one. Its kind and status
// are tags (span.kind, otel.status_code, otel.status_description).
type JaegerSpan struct {
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	ProcessID     string `json:"processID"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []JaegerTag `json:"tags"`
}

// JaegerTag is one attribute of a span or a resource.
type JaegerTag struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}

// Find returns the spans of service named operation.
func (tr JaegerTrace) Find(service, operation string) []JaegerSpan {
	var out []JaegerSpan
	for _, s := range tr.Spans {
		if s.OperationName == operation && tr.Processes[s.ProcessID].ServiceName == service {
			out = append(out, s)
		}
	}
	return out
}

// Tag is the value of s's attribute key as text, "" without it.
func (s JaegerSpan) Tag(key string) string { return tagValue(s.Tags, key) }

// ProcessTag is the value of the resource attribute key of s's process.
func (tr JaegerTrace) ProcessTag(s JaegerSpan, key string) string {
	return tagValue(tr.Processes[s.ProcessID].Tags, key)
}

func tagValue(tags []JaegerTag, key string) string {
	for _, kv := range tags {
		if kv.Key == key {
			return fmt.Sprint(kv.Value)
		}
	}
	return ""
}

// ChildOf says whether s's parent is the span parent of trace traceID.
func (s JaegerSpan) ChildOf(traceID, parent string) bool {
	return s.references("CHILD_OF", traceID, parent)
}

// LinksTo says whether s links to the span span of trace traceID: Jaeger
// shows a span's links as FOLLOWS_FROM references.
func (s JaegerSpan) LinksTo(traceID, span string) bool {
	return s.references("FOLLOWS_FROM", traceID, span)
}

func (s JaegerSpan) references(kind, traceID, span string) bool {
	for _, r := range s.References {
		if r.RefType == kind && r.TraceID == traceID && r.SpanID == span {
			return true
		}
	}
	return false
}

// Traces reads every trace j holds with a span of service.
func (j *Jaeger) Traces(t testing.TB, service string) []JaegerTrace {
	t.Helper()
	q := url.Values{"service": {service}, "limit": {"1000"}, "lookback": {"1h"}}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(j.Query + "/api/traces?" + q.Encode())
	if err != nil {
		t.Fatalf("query Jaeger: %v", err)
	}
	defer resp.Body.Close()
	var body struct {
		Data []JaegerTrace `json:"data"`
	}
	if resp.StatusCode == http.StatusNotFound {
		// No span of service has arrived yet.
		return nil
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("query Jaeger: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("query Jaeger: %v", err)
	}
	return body.Data
}
