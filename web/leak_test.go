package web_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when any goroutine outlives them: web
// starts servers and session cleanups, and one left running after its owner
// stopped is a shutdown bug.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// scs.New starts a cleanup goroutine for its default in-memory
		// store before hookd replaces that store with PostgreSQL's; scs
		// offers no race-free way to stop it, and it is one idle goroutine
		// per session manager.
		goleak.IgnoreTopFunction("github.com/alexedwards/scs/v2/memstore.(*MemStore).startCleanup"))
}
