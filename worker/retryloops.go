package worker

import (
	"cmp"
	"context"
	"log/slog"
	"sync"

	"github.com/hookd/hookd/queue"
)

// RetryLoops runs a retry loop for each destination of a Fanout, at the
// destination's own concurrency and timeout, so that one whose app is slow
// or down takes no claim or slot from another's, and one more loop that
// runs every destination's suspects alone and claims nothing else. Sync,
// after the Fanout's configuration changed, starts the loops of
// destinations new to it and stops those of destinations gone.
type RetryLoops struct {
	store    *queue.Store
	logger   *slog.Logger
	cfg      ProducerConfig
	fanout   *Fanout
	suspects *Retrier

	mu      sync.Mutex
	ctx     context.Context // Run's, once it runs
	running map[string]*retryLoop
	wg      sync.WaitGroup
}

// retryLoop is one destination's running retry loop.
type retryLoop struct {
	cfg    ProducerConfig
	cancel context.CancelFunc
	done   chan struct{}
}

// NewRetryLoops returns the retry loops of fanout's destinations, each
// configured as cfg but for its destination, concurrency and timeout;
// cfg.Processor is fanout.
func NewRetryLoops(store *queue.Store, logger *slog.Logger, cfg ProducerConfig, fanout *Fanout) *RetryLoops {
	cfg.Processor = fanout
	suspects := cfg
	suspects.SuspectsOnly, suspects.Suspects = true, fanout.Names
	return &RetryLoops{store: store, logger: logger, cfg: cfg, fanout: fanout, running: map[string]*retryLoop{},
		suspects: NewRetrier(store, logger.With("loop", "suspects"), suspects)}
}

// Suspects is the loop that runs every destination's suspects alone, for
// RunsReplaySuspects.
func (l *RetryLoops) Suspects() *Retrier { return l.suspects }

// Run runs the loops until ctx is done, then waits for each to stop.
func (l *RetryLoops) Run(ctx context.Context) error {
	l.mu.Lock()
	l.ctx = ctx
	l.mu.Unlock()
	l.Sync()
	err := l.suspects.Run(ctx)
	l.wg.Wait()
	return err
}

// Sync makes the running loops those of the Fanout's destinations as
// configured now: a loop starts for each new destination, and for one
// whose concurrency, timeout or rate changed (after its old loop stopped); the
// loop of a destination no longer configured stops, giving back what it
// claimed and had not started.
func (l *RetryLoops) Sync() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil || l.ctx.Err() != nil {
		return
	}
	want := map[string]ProducerConfig{}
	for _, name := range l.fanout.Names() {
		dest, _ := l.fanout.Destination(name)
		own := l.cfg
		own.Destination, own.ProcessTimeout = name, dest.Timeout
		own.Concurrency = cmp.Or(dest.Concurrency, l.cfg.Concurrency)
		own.NoSuspects = true
		own.Pace = l.fanout.Pace(name)
		want[name] = own
	}
	for name, loop := range l.running {
		if cfg, ok := want[name]; ok && cfg.Concurrency == loop.cfg.Concurrency && cfg.ProcessTimeout == loop.cfg.ProcessTimeout &&
			cfg.Pace.PerSecond() == loop.cfg.Pace.PerSecond() {
			delete(want, name)
			continue
		}
		loop.cancel()
		<-loop.done
		delete(l.running, name)
		l.logger.Info("a destination's retry loop stopped: it is no longer configured as it was", "destination", name)
	}
	for name, cfg := range want {
		ctx, cancel := context.WithCancel(l.ctx)
		loop := &retryLoop{cfg: cfg, cancel: cancel, done: make(chan struct{})}
		r := NewRetrier(l.store, l.logger.With("destination", name), cfg)
		l.running[name] = loop
		l.wg.Go(func() {
			defer close(loop.done)
			if err := r.Run(ctx); err != nil && ctx.Err() == nil {
				l.logger.Error("a destination's retry loop failed", "destination", name, "err", err)
			}
		})
	}
}
