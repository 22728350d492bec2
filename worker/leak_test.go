package worker_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when any goroutine outlives them: worker
// starts loops and servers, and one left running after its owner stopped is a
// shutdown bug.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
