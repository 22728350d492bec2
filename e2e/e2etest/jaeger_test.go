package e2etest_test

import (
	"testing"

	"github.com/hookd/hookd/e2e/e2etest"
)

// TestStartJaegerAnswersItsQueryAPI starts the Jaeger the trace tests run,
// on ports of its own, and reads its query API: a fresh one holds no
// traces.
func TestStartJaegerAnswersItsQueryAPI(t *testing.T) {
	t.Parallel()
	j := e2etest.StartJaeger(t)
	if traces := j.Traces(t, "no-such-service"); len(traces) != 0 {
		t.Errorf("a fresh Jaeger holds %d traces of a service nobody sent", len(traces))
	}
}
