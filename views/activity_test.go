package views

import (
	"testing"
	"time"

	"github.com/hookd/hookd/internal/store/activity"
)

func TestActivityCharts(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	a := Activity{Range: activityHour, Buckets: []activity.Bucket{
		{Start: start, Counts: activity.Counts{Received: 1000}},
		{Start: start.Add(time.Minute), Counts: activity.Counts{Received: 1}},
		{Start: start.Add(2 * time.Minute)},
	}}
	labels := a.labels()
	charts := a.charts(labels)
	if len(charts) != len(activitySeriesList) {
		t.Fatalf("%d charts, want one per series", len(charts))
	}
	received := charts[0]
	if received.Total != 1001 || received.Peak != 1000 || received.PeakAt != "12:00 UTC" {
		t.Errorf("total %d, peak %d at %q; want 1001, 1000 at 12:00 UTC", received.Total, received.Peak, received.PeakAt)
	}
	want := []activityBar{
		// The peak fills the height; one among a thousand still shows; an
		// empty minute is a baseline, marked zero.
		{X: "1", Y: "0.0", H: "100.0", Text: "12:00 UTC: 1,000 received"},
		{X: "11", Y: "97.0", H: "3.0", Text: "12:01 UTC: 1 received"},
		{X: "21", Y: "99.0", H: "1.0", Zero: true, Text: "12:02 UTC: 0 received"},
	}
	for i, b := range received.Bars {
		if b != want[i] {
			t.Errorf("bar %d: got %+v, want %+v", i, b, want[i])
		}
	}
	if got := a.summary(received); got != "Received per minute over the last hour: 1,001 in all, at most 1,000 in one minute (12:00 UTC)." {
		t.Errorf("summary %q", got)
	}
	if got := a.summary(charts[4]); got != "Dead per minute over the last hour: none." {
		t.Errorf("summary of an empty chart %q", got)
	}
	week := Activity{Range: activityWeek, Buckets: a.Buckets}
	if got := week.labels()[0]; got != "Tue 10 Mar 12:00 UTC" {
		t.Errorf("hourly label %q, want Tue 10 Mar 12:00 UTC", got)
	}
	if ParseActivityRange("week") != activityWeek || ParseActivityRange("month") != activityHour {
		t.Error("ParseActivityRange: want week for week, the hour for anything else")
	}
}
