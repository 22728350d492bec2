package queue

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

// watcherSaying is a BreakerWatcher whose row counts, or not, for every
// destination.
type watcherSaying bool

func (watcherSaying) Observe(bool, int)                    {}
func (w watcherSaying) Counting() bool                     { return bool(w) }
func (watcherSaying) ObserveDestination(string, bool, int) {}
func (w watcherSaying) CountingDestination(string) bool    { return bool(w) }

// An answer, a success or a failure the app answered, sets the breaker's
// count back to 0: while this replica's copy of the row counts nothing,
// there is nothing to set back and the outcome costs no statement. An app
// that answers 500 to every call is such a case on every batch.
func TestBreakerTally_AnAnswerWhileNothingCountsCostsNoStatement(t *testing.T) {
	t.Parallel()
	failed := &NewAttempt{Error: "the app answered 500"}
	down := &NewAttempt{Error: "connection refused", AppDown: true}
	for _, c := range []struct {
		name     string
		outcomes func(*breakerTally)
		counting bool
		want     bool
	}{
		{"a success", func(t *breakerTally) { t.add(nil, true) }, false, false},
		{"an answered failure", func(t *breakerTally) { t.add(failed, false) }, false, false},
		{"an app-down failure, then an answer", func(t *breakerTally) { t.add(down, false); t.add(failed, false) }, false, false},
		{"an answer, then an app-down failure", func(t *breakerTally) { t.add(failed, false); t.add(down, false) }, false, true},
		{"an answered failure while the row counts", func(t *breakerTally) { t.add(failed, false) }, true, true},
		{"a success while the row counts", func(t *breakerTally) { t.add(nil, true) }, true, true},
	} {
		var one, app breakerTally
		c.outcomes(&one)
		c.outcomes(&app)
		if got := one.queue(&pgx.Batch{}, breakerConfig{failures: 5, watcher: watcherSaying(c.counting)}); got != c.want {
			t.Errorf("%s: statement sent %v, want %v", c.name, got, c.want)
		}
		dest := destinationTallies{byName: map[string]*breakerTally{"app": &app}}
		if got := dest.queue(&pgx.Batch{}, &destinationBreakers{failures: 5, watcher: watcherSaying(c.counting)}); got != c.want {
			t.Errorf("%s, one destination of several: statement sent %v, want %v", c.name, got, c.want)
		}
	}
}
