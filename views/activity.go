package views

import (
	"fmt"
	"strconv"
	"time"

	"github.com/hookd/hookd/internal/store/activity"
)

// ActivityRange is which of the overview's charts is shown.
type ActivityRange string

const (
	activityHour ActivityRange = "hour" // the last hour, minute by minute
	activityWeek ActivityRange = "week" // the last 7 days, hour by hour
)

// ParseActivityRange reads the overview's ?activity=; anything but "week"
// is the last hour.
func ParseActivityRange(s string) ActivityRange {
	if s == string(activityWeek) {
		return activityWeek
	}
	return activityHour
}

// Query is the range in the store's terms.
func (r ActivityRange) Query() activity.Range {
	if r == activityWeek {
		return activity.LastWeek
	}
	return activity.LastHour
}

// Activity is the overview's charts: what the pipeline did in each bucket
// of the range, oldest first.
type Activity struct {
	Range   ActivityRange
	Buckets []activity.Bucket
}

// activitySeries is one chart: a count of every bucket, named for people.
type activitySeries struct {
	Key   string // CSS and test id suffix
	Name  string
	Verb  string // completes "5 …" in a bar's text
	Note  string
	count func(activity.Counts) int64
}

var activitySeriesList = []activitySeries{
	{"received", "Received", "received", "every delivery, whatever the answer",
		func(c activity.Counts) int64 { return c.Received }},
	{"processed", "Processed", "processed", "reached your app, at once or on a retry",
		func(c activity.Counts) int64 { return c.Processed }},
	{"queued", "Queued", "queued", "failed at once, put on the retry queue",
		func(c activity.Counts) int64 { return c.Queued }},
	{"retried", "Retried", "retried", "retries run, whatever their result",
		func(c activity.Counts) int64 { return c.Retried }},
	{"dead", "Dead", "went dead", "out of retries, waiting for a person",
		func(c activity.Counts) int64 { return c.Dead }},
	{"rejected", "Refused", "refused", "refused with a 4xx: signature, body, size",
		func(c activity.Counts) int64 { return c.Rejected }},
}

// chartHeight is the SVG's height in its own units; each bucket is
// barSlot units wide, its bar barWidth of them.
const (
	chartHeight = 100
	barSlot     = 10
	barWidth    = 8
)

// activityChart is one series drawn over the range.
type activityChart struct {
	activitySeries
	Total, Peak int64
	PeakAt      string
	Bars        []activityBar
	ViewBox     string
}

// activityBar is one bucket's bar, with the text that stands for it.
type activityBar struct {
	X, Y, H string
	Zero    bool
	Text    string
}

// labels names each bucket, once for all the charts and the table.
func (a Activity) labels() []string {
	labels := make([]string, len(a.Buckets))
	for i, b := range a.Buckets {
		labels[i] = a.bucketLabel(b.Start)
	}
	return labels
}

// activityRow is one bucket of the table: its name and every count.
type activityRow struct {
	Label  string
	Counts []string
}

// rows is the table of every count of every bucket.
func (a Activity) rows(labels []string) []activityRow {
	rows := make([]activityRow, len(a.Buckets))
	for i, b := range a.Buckets {
		counts := make([]string, len(activitySeriesList))
		for j, s := range activitySeriesList {
			counts[j] = Count(s.count(b.Counts))
		}
		rows[i] = activityRow{Label: labels[i], Counts: counts}
	}
	return rows
}

// charts draws each series.
func (a Activity) charts(labels []string) []activityChart {
	out := make([]activityChart, len(activitySeriesList))
	for i, s := range activitySeriesList {
		c := activityChart{activitySeries: s, ViewBox: fmt.Sprintf("0 0 %d %d", len(a.Buckets)*barSlot, chartHeight)}
		for j, b := range a.Buckets {
			n := s.count(b.Counts)
			c.Total += n
			if n > c.Peak {
				c.Peak, c.PeakAt = n, labels[j]
			}
		}
		c.Bars = make([]activityBar, 0, len(a.Buckets))
		for j, b := range a.Buckets {
			n := s.count(b.Counts)
			// A bar of one among thousands still shows; an empty bucket is
			// a faint baseline, so it can be pointed at too.
			h := 1.0
			if n > 0 {
				h = max(3, float64(chartHeight)*float64(n)/float64(c.Peak))
			}
			c.Bars = append(c.Bars, activityBar{
				X:    strconv.Itoa(j*barSlot + (barSlot-barWidth)/2),
				Y:    strconv.FormatFloat(chartHeight-h, 'f', 1, 64),
				H:    strconv.FormatFloat(h, 'f', 1, 64),
				Zero: n == 0,
				Text: labels[j] + ": " + Count(n) + " " + s.Verb,
			})
		}
		out[i] = c
	}
	return out
}

// Step is the range's bucket in words: "minute" or "hour".
func (a Activity) Step() string {
	if a.Range == activityWeek {
		return "hour"
	}
	return "minute"
}

// Span is the range in words.
func (a Activity) Span() string {
	if a.Range == activityWeek {
		return "the last 7 days"
	}
	return "the last hour"
}

// bucketLabel names a bucket by its start, in UTC like every time on the
// dashboard: "12:03 UTC", or "Tue 10 Mar 12:00 UTC" by the hour.
func (a Activity) bucketLabel(t time.Time) string {
	if a.Range == activityWeek {
		return t.UTC().Format("Mon 2 Jan 15:04 UTC")
	}
	return t.UTC().Format("15:04 UTC")
}

// axisLabel is the shorter label under a chart's ends.
func (a Activity) axisLabel(t time.Time) string {
	if a.Range == activityWeek {
		return t.UTC().Format("Mon 2 Jan")
	}
	return t.UTC().Format("15:04")
}

// first and last are the range's first and last buckets' starts.
func (a Activity) first() time.Time {
	if len(a.Buckets) == 0 {
		return time.Time{}
	}
	return a.Buckets[0].Start
}

func (a Activity) last() time.Time {
	if len(a.Buckets) == 0 {
		return time.Time{}
	}
	return a.Buckets[len(a.Buckets)-1].Start
}

// summary is what a chart says to a screen reader as a whole.
func (a Activity) summary(c activityChart) string {
	if c.Total == 0 {
		return fmt.Sprintf("%s per %s over %s: none.", c.Name, a.Step(), a.Span())
	}
	return fmt.Sprintf("%s per %s over %s: %s in all, at most %s in one %s (%s).",
		c.Name, a.Step(), a.Span(), Count(c.Total), Count(c.Peak), a.Step(), c.PeakAt)
}

func (a Activity) refreshURL() string {
	return "/overview/activity?activity=" + string(a.Range)
}
