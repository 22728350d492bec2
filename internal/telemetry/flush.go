package telemetry

import (
	"context"
	"time"

	"github.com/hookd/hookd/internal/startstop"
)

// flushLoop is the one loop of the in-memory buffers that write to the
// database in batches (Activity's counts, the RejectionLog): it calls
// flush every interval until its context is cancelled, then once more, and
// returns. A flush is never cancelled half way, which would leave unknown
// whether its rows were written, so each runs on a context of its own,
// bounded by timeout. failed hears of each error, with last set for the
// flush at stop.
func flushLoop(interval, timeout time.Duration, flush func(context.Context) error,
	failed func(ctx context.Context, err error, last bool)) *startstop.Service {
	once := func(ctx context.Context, last bool) {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		if err := flush(flushCtx); err != nil {
			failed(ctx, err, last)
		}
	}
	return startstop.New(func(ctx context.Context) {
		startstop.Every(ctx, interval, func(ctx context.Context) { once(ctx, false) })
		once(ctx, true)
	})
}
