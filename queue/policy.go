package queue

import (
	"slices"
	"time"
)

// The retry policy: how long a failed event waits before each retry, and
// how many retries it gets before it is dead. It is Go, not SQL: the retry
// loop (through SettleAndStart), the seed's ScheduleRetry, the dashboard,
// hookd doctor and the tests all read it here, and the statements are given
// its answers as arguments.

// MaxAttempts is the number of retries after which an event is dead: one
// for each step of the backoff.
const MaxAttempts = 5

// backoff is the wait before the next retry, indexed by the attempt count the
// failure brings the event to: the inline failure (0) waits 1 minute, then 5
// minutes, 30 minutes, 2 hours and 24 hours. Stripe itself retries for three
// days; the last step keeps an outage of a day from killing an event.
var backoff = [MaxAttempts]time.Duration{
	60 * time.Second,
	300 * time.Second,
	1800 * time.Second,
	7200 * time.Second,
	86400 * time.Second,
}

// Backoff returns the policy's waits, in order: the wait before retry n+1
// is Backoff()[n].
func Backoff() []time.Duration { return slices.Clone(backoff[:]) }

// RetryDelay returns how long an event that has now failed attempts retries
// waits before the next one.
func RetryDelay(attempts int) time.Duration {
	return backoff[min(max(attempts, 0), MaxAttempts-1)]
}

// demoBackoffDivisor turns each hour of the backoff schedule into a second,
// so the demo shows a whole life (failed, retried, dead) in half a minute.
const demoBackoffDivisor = time.Hour / time.Second

// WithDemoBackoff makes the Store run the backoff schedule in seconds, not
// hours: every wait is 3,600 times shorter (24 hours become 24 seconds),
// while the number of attempts and the order of the waits stay the policy's.
// It exists for `make run`'s demo, where a person should see an event go
// dead within a minute; with it, Stripe's three days of redeliveries are no
// longer covered, so production never sets it.
func WithDemoBackoff() Option { return func(s *Store) { s.demoBackoff = true } }

// DemoBackoff reports whether the Store runs the demo's backoff.
func (s *Store) DemoBackoff() bool { return s.demoBackoff }

// RetryDelay is how long this Store makes an event that has now failed
// attempts retries wait: the policy's RetryDelay, shortened under
// WithDemoBackoff.
func (s *Store) RetryDelay(attempts int) time.Duration {
	d := RetryDelay(attempts)
	if s.demoBackoff {
		d /= demoBackoffDivisor
	}
	return d
}

// afterFailure is where an event stands once a failed retry has brought it
// to attempts: retrying, due again after this Store's RetryDelay, or dead at
// MaxAttempts. It returns the new status and the seconds until the next
// retry, nil for a dead event, which has none: every statement that records
// a failed retry takes its arguments from here.
func (s *Store) afterFailure(attempts int) (Status, *float64) {
	if attempts >= MaxAttempts {
		return StatusDead, nil
	}
	wait := s.RetryDelay(attempts).Seconds()
	return StatusRetrying, &wait
}

// pending is the SQL condition that a queue row is pending: failed or
// retrying, so a retry may claim it and a person may hasten it. It is
// written into the statements, not passed as a parameter, so the planner
// can match it to the partial indexes that hold only pending rows (their
// predicate, in the migrations, is this same condition).
const pending = "status IN ('" + string(StatusFailed) + "', '" + string(StatusRetrying) + "')"

// Pending is pending's rule in Go, for a row already read: its status is
// failed or retrying.
func (s Status) Pending() bool { return s == StatusFailed || s == StatusRetrying }
