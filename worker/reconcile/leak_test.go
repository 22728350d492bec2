package reconcile_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when any goroutine outlives them: the
// schedule is a loop, and one still running after Run returned is a
// shutdown bug.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
