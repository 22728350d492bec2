// Package startstop is how every long-running loop of hookd serve starts,
// ticks and stops, after River's rivershared/startstop: a Service runs one
// loop in a goroutine of its own and stops it, waiting until it has ended;
// Every and Loop are the two usual ways a loop waits between its turns. A
// loop that must finish its work past its context's end (the retry loop's
// batches, the alerts in flight, the last flush) does so inside the loop,
// before it returns: Stop, and so Run, waits for it.
package startstop

import (
	"context"
	"sync"
	"time"
)

// Service runs one background loop: Start launches it in a goroutine of
// its own, Stop ends it and waits until it has, and both may be called at
// any time and more than once. Run is the two together, for an errgroup.
type Service struct {
	loop func(ctx context.Context)

	mu      sync.Mutex
	cancel  context.CancelFunc
	stopped chan struct{}
}

// New returns a Service whose loop runs until its context is cancelled.
func New(loop func(ctx context.Context)) *Service {
	return &Service{loop: loop}
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
// nil once it has ended: a loop logs its failures and goes on, so none ends
// hookd serve.
func (s *Service) Run(ctx context.Context) error {
	s.Start(ctx)
	<-ctx.Done()
	s.Stop()
	return nil
}

// Every calls job each time interval passes, at a steady rate, until ctx
// is cancelled; the first call is one interval in. A job that outlasts
// interval delays the next one rather than running beside it. A loop that
// also works at start calls job once before.
func Every(ctx context.Context, interval time.Duration, job func(ctx context.Context)) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if ctx.Err() != nil {
			return
		}
		job(ctx)
	}
}

// Wake wakes a loop waiting between its turns (Loop's wake): Signal never
// blocks, and the signals sent while the loop is busy wake it once.
type Wake chan struct{}

// NewWake returns a Wake with room for the one signal that counts.
func NewWake() Wake { return make(Wake, 1) }

// Signal wakes the loop, or leaves it to wake when it next waits.
func (w Wake) Signal() {
	select {
	case w <- struct{}{}:
	default:
	}
}

// Loop calls job at once, and then again once the wait it returned has
// passed (at once for 0), or as soon as wake receives, until ctx is
// cancelled. A loop whose work decides its pace (a batch that came back
// full goes again at once, an idle one waits) runs on it; a nil wake never
// receives.
func Loop(ctx context.Context, wake <-chan struct{}, job func(ctx context.Context) (wait time.Duration)) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-timer.C:
		}
		if ctx.Err() != nil {
			return
		}
		timer.Reset(job(ctx))
	}
}

// Outlive returns a context that is cancelled grace after ctx is, or when
// cancel is called: the work a loop has in flight when it is told to stop
// (a batch's processor runs, the alerts waiting to be sent) finishes on it,
// and is cut short only if it outlasts the grace. Call cancel once that
// work has ended.
func Outlive(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	outliving, end := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(grace, end)
		context.AfterFunc(outliving, func() { t.Stop() })
	})
	return outliving, func() {
		stop()
		end()
	}
}
