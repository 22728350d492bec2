package startstop_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/hookd/hookd/internal/startstop"
)

// TestMain fails the package's tests when any goroutine outlives them: a
// loop left running after Stop is a shutdown bug.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestService_StartAndStopAnyNumberOfTimes holds the start/stop helper to
// its promise: a second Start while running starts nothing, Stop waits for
// the loop and may be called again, and a stopped Service starts anew.
func TestService_StartAndStopAnyNumberOfTimes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var started, ended atomic.Int64
		s := startstop.New(func(ctx context.Context) {
			started.Add(1)
			<-ctx.Done()
			// Work that outlives the context: Stop waits for it.
			time.Sleep(time.Second)
			ended.Add(1)
		})
		s.Stop()
		for round := int64(1); round <= 2; round++ {
			s.Start(t.Context())
			s.Start(t.Context())
			synctest.Wait()
			if got := started.Load(); got != round {
				t.Fatalf("round %d: loops started: got %d, want %d", round, got, round)
			}
			s.Stop()
			if got := ended.Load(); got != round {
				t.Fatalf("round %d: loops ended once Stop returned: got %d, want %d", round, got, round)
			}
			s.Stop()
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := s.Run(ctx); err != nil {
			t.Errorf("run on a cancelled context: %v, want nil", err)
		}
		if got := ended.Load(); got != 3 {
			t.Errorf("loops ended once Run returned: got %d, want 3", got)
		}
	})
}

// TestEvery_TicksAtItsRateUntilCancelled: the first call is one interval
// in, the next at a steady rate, and none after the context ends.
func TestEvery_TicksAtItsRateUntilCancelled(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var calls atomic.Int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			startstop.Every(ctx, time.Second, func(context.Context) { calls.Add(1) })
		}()
		for _, c := range []struct {
			after time.Duration
			want  int64
		}{{500 * time.Millisecond, 0}, {time.Second, 1}, {2 * time.Second, 3}} {
			time.Sleep(c.after)
			synctest.Wait()
			if got := calls.Load(); got != c.want {
				t.Fatalf("calls: got %d, want %d", got, c.want)
			}
		}
		cancel()
		<-done
		time.Sleep(5 * time.Second)
		if got := calls.Load(); got != 3 {
			t.Errorf("calls after cancel: got %d, want 3", got)
		}
	})
}

// TestLoop_RunsAtOnceThenAfterItsWaitOrAWake: the job's own answer sets
// the wait before its next call, and a wake cuts it short.
func TestLoop_RunsAtOnceThenAfterItsWaitOrAWake(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		wake := make(chan struct{}, 1)
		var calls atomic.Int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			startstop.Loop(ctx, wake, func(context.Context) time.Duration {
				calls.Add(1)
				return time.Hour
			})
		}()
		synctest.Wait()
		if got := calls.Load(); got != 1 {
			t.Fatalf("calls at start: got %d, want 1", got)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := calls.Load(); got != 1 {
			t.Fatalf("calls within the wait: got %d, want 1", got)
		}
		wake <- struct{}{}
		synctest.Wait()
		if got := calls.Load(); got != 2 {
			t.Fatalf("calls after a wake: got %d, want 2", got)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := calls.Load(); got != 3 {
			t.Fatalf("calls after the wait: got %d, want 3", got)
		}
		cancel()
		<-done
	})
}

// An outliving context lives on after its parent is cancelled, for its
// grace, and ends at once when its own cancel is called.
func TestOutlive_EndsGraceAfterItsParentOrWhenCancelled(t *testing.T) {
	parent, cancelParent := context.WithCancel(context.Background())
	long, cancelLong := startstop.Outlive(parent, time.Hour)
	short, cancelShort := startstop.Outlive(parent, time.Millisecond)
	defer cancelShort()
	if long.Err() != nil || short.Err() != nil {
		t.Fatal("an outliving context ended before its parent")
	}
	cancelParent()
	select {
	case <-short.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the context with a short grace did not end after its parent")
	}
	if long.Err() != nil {
		t.Fatal("the context with an hour's grace ended with its parent")
	}
	cancelLong()
	if long.Err() == nil {
		t.Fatal("cancel did not end the outliving context")
	}
}
