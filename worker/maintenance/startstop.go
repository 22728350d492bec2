// Package maintenance holds hookd serve's housekeeping on a schedule: the
// pruner, which deletes what has aged out, and the alerter, which posts
// when a condition starts and when it clears. Both are a Service: one
// start/stop helper, so that how a loop starts, ticks and stops is written
// once.
package maintenance

import (
	"context"
	"sync"
	"time"
)

// Service runs one background loop, after River's startstop: Start
// launches it in a goroutine of its own, Stop ends it and waits until it
// has, and both may be called at any time and more than once. Run is the
// two together, for an errgroup: it returns once its context is cancelled
// and the loop has ended.
type Service struct {
	loop func(ctx context.Context)

	mu      sync.Mutex
	cancel  context.CancelFunc
	stopped chan struct{}
}

// newService returns a Service whose loop runs until its context is
// cancelled.
func newService(loop func(ctx context.Context)) Service {
	return Service{loop: loop}
}

// Start runs the loop in a goroutine until ctx is cancelled or Stop is
// called. It does nothing while the loop runs already.
func (s *Service) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped != nil {
		return
	}
	ctx, s.cancel = context.WithCancel(ctx)
	stopped := make(chan struct{})
	s.stopped = stopped
	go func() {
		defer close(stopped)
		s.loop(ctx)
	}()
}

// Stop ends the loop started by Start and waits until it has returned. The
// Service may then be started again.
func (s *Service) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped == nil {
		return
	}
	s.cancel()
	<-s.stopped
	s.cancel, s.stopped = nil, nil
}

// Run starts the loop, waits for ctx to be cancelled, stops it, and returns
// nil: a loop logs its failures and goes on, so none ends hookd serve.
func (s *Service) Run(ctx context.Context) error {
	s.Start(ctx)
	<-ctx.Done()
	s.Stop()
	return nil
}

// every calls job at once and then every interval until ctx is cancelled.
// A job that outlasts interval delays the next one rather than running
// beside it.
func every(ctx context.Context, interval time.Duration, job func(ctx context.Context)) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		job(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}
