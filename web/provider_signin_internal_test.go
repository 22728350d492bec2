package web

import (
	"testing"
	"time"
)

// A sign-in started on a replica whose clock runs ahead is finished on
// another: up to idp.ClockSkew either way.
func TestStateFresh_ToleratesAMinuteOfSkew(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		started time.Time
		fresh   bool
	}{
		{now.Add(-time.Second), true},
		{now.Add(time.Second), true}, // the starting replica's clock a second ahead
		{now.Add(59 * time.Second), true},
		{now.Add(2 * time.Minute), false},
		{now.Add(-oidcStateLifetime), true},
		{now.Add(-oidcStateLifetime - 2*time.Minute), false},
	} {
		if got := stateFresh(tc.started, now); got != tc.fresh {
			t.Errorf("started %v from now: fresh %v, want %v", tc.started.Sub(now), got, tc.fresh)
		}
	}
}
