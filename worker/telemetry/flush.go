package telemetry

import (
	"context"
	"time"
)

// runFlushes calls flush every interval until ctx is cancelled, then once
// more, and returns. It is the one loop of the in-memory buffers that write
// to the database in batches (Activity's counts, the RejectionLog): a flush is
// never cancelled half way, which would leave unknown whether its rows were
// written, so each runs on a context of its own, bounded by timeout. failed
// hears of each error, with last set for the flush at stop.
func runFlushes(ctx context.Context, interval, timeout time.Duration,
	flush func(context.Context) error, failed func(err error, last bool)) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	once := func() error {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		return flush(flushCtx)
	}
	for {
		select {
		case <-ctx.Done():
			if err := once(); err != nil {
				failed(err, true)
			}
			return
		case <-ticker.C:
		}
		if err := once(); err != nil {
			failed(err, false)
		}
	}
}
