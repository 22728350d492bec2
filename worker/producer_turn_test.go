package worker

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// flushedJobs is a path whose writes end together, as the retry loop's
// do when its stepWriter sends the workers' writes as one: each write
// returns at the next flush, every flushEvery. Its processor records when
// each job is called.
type flushedJobs struct {
	start      time.Time
	flushEvery time.Duration

	mu     sync.Mutex
	called []time.Time
	ended  map[int]Result
	cut    map[int]error
}

func (f *flushedJobs) prepare(context.Context, int) bool { return true }

func (f *flushedJobs) begin(ctx context.Context, j int) (context.Context, Delivery) {
	return ctx, Delivery{EventID: "evt_" + string(rune('a'+j))}
}

func (f *flushedJobs) end(ctx context.Context, j int, res Result, _ time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended[j] = res
	if ctx.Err() != nil {
		f.cut[j] = context.Cause(ctx)
	}
}

func (f *flushedJobs) write(_, next int) bool {
	since := time.Since(f.start)
	time.Sleep(f.flushEvery - since%f.flushEvery)
	return next != 0
}

func (f *flushedJobs) settled(context.Context, int) {}

func (f *flushedJobs) Process(context.Context, Delivery) Result {
	f.mu.Lock()
	f.called = append(f.called, time.Now())
	f.mu.Unlock()
	return Result{}
}

// TestWork_AJobKeptPastItsTurnByItsStartWaitsForAnother proves that the
// write of a job's start, which comes between its turn under the Pace and
// its call, cannot bunch calls: four workers take turns 100 ms apart, and
// their starts are written together, at the next 350 ms; a job whose turn
// passed while it was written waits for another, so no two calls are less
// than a tenth of the interval apart (a call may go up to an interval
// late, beside the next one's, but not with two others). A job whose lease is too short for
// another turn is given back uncounted (errTurnMissed), not called late.
func TestWork_AJobKeptPastItsTurnByItsStartWaitsForAnother(t *testing.T) {
	const interval = 100 * time.Millisecond
	paths := func() *flushedJobs {
		return &flushedJobs{start: time.Now(), flushEvery: 350 * time.Millisecond,
			ended: map[int]Result{}, cut: map[int]error{}}
	}
	t.Run("another turn", func(t *testing.T) {
		f := paths()
		p := newProducer(ProducerConfig{Processor: f, Pace: NewPace(float64(time.Second / interval)), Concurrency: 4,
			ProcessTimeout: time.Second}, 1)
		jobs := []int{1, 2, 3, 4, 5, 6, 7, 8}
		work(t.Context(), &p, time.Now().Add(time.Minute), jobs, f)
		if len(f.called) != len(jobs) {
			t.Fatalf("%d calls, want %d: %v", len(f.called), len(jobs), f.ended)
		}
		slices.SortFunc(f.called, func(a, b time.Time) int { return a.Compare(b) })
		for i := 1; i < len(f.called); i++ {
			if gap := f.called[i].Sub(f.called[i-1]); gap < interval/10 {
				t.Errorf("calls %d and %d %v apart, want at least %v", i-1, i, gap, interval/10)
			}
		}
	})
	t.Run("no turn within the lease", func(t *testing.T) {
		f := paths()
		p := newProducer(ProducerConfig{Processor: f, Pace: NewPace(float64(time.Second / interval)), Concurrency: 4,
			ProcessTimeout: time.Second}, 1)
		// The lease leaves 150 ms to wait for a turn: the two jobs get
		// theirs at 0 and 100 ms, and miss them while their starts are
		// written, until 350 ms. Then one gets the turn of 200 ms, late
		// but free, and the next turn, at 450 ms, is past the lease.
		jobs := []int{1, 2}
		work(t.Context(), &p, time.Now().Add(time.Second+interval*3/2), jobs, f)
		var missed int
		for _, j := range jobs {
			if errors.Is(f.cut[j], errTurnMissed) {
				missed++
				if !errors.Is(f.ended[j].Err, errTurnMissed) {
					t.Errorf("job %d cut short with %v", j, f.ended[j].Err)
				}
			}
		}
		if missed != 1 || len(f.called) != 1 {
			t.Errorf("%d jobs given back for a missed turn and %d called, want 1 and 1: %v", missed, len(f.called), f.ended)
		}
	})
}
