package humanize

import (
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0 s"},
		{45 * time.Second, "45 s"},
		{12*time.Minute + 30*time.Second, "12 min"},
		{3 * time.Hour, "3 h"},
		{3*time.Hour + 5*time.Minute, "3 h 5 min"},
		{47*time.Hour + 59*time.Minute, "47 h 59 min"},
		{4 * 24 * time.Hour, "4 days"},
	} {
		if got := Duration(tc.d); got != tc.want {
			t.Errorf("Duration(%s) = %q, want %q", tc.d, got, tc.want)
		}
	}
}
