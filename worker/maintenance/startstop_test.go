package maintenance_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker/maintenance"
)

// TestService_StartAndStopAnyNumberOfTimes holds the start/stop helper to
// its promise: a second Start while running starts nothing, Stop waits for
// the loop and may be called again, and a stopped Service starts anew.
func TestService_StartAndStopAnyNumberOfTimes(t *testing.T) {
	t.Parallel()
	bundle := setup(t)
	p := maintenance.NewPruner(bundle.store, bundle.accounts, bundle.activity, bundle.rejections, discardLogger, maintenance.PrunerConfig{Interval: time.Hour})
	p.Stop()
	for range 2 {
		p.Start(t.Context())
		p.Start(t.Context())
		queuetest.WaitFor(t, 5*time.Second, "a prune recorded", func() bool {
			ws, err := bundle.store.WorkerStatus(t.Context())
			return err == nil && ws.PrunerRun != nil
		})
		p.Stop()
		p.Stop()
		if _, err := bundle.pool.Exec(t.Context(), `DELETE FROM worker_status WHERE component = 'pruner'`); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := p.Run(ctx); err != nil {
		t.Errorf("run on a cancelled context: %v, want nil", err)
	}
}
