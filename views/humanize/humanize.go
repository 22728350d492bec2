// Package humanize says durations the way people read them. It is its own
// leaf package so the dashboard's pages and the alerts' messages, which
// worker sends, say a duration the same way without worker importing the
// templates.
package humanize

import (
	"fmt"
	"strconv"
	"time"
)

// Duration formats d for people: "45 s", "12 min", "3 h 5 min", "4 days".
func Duration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		h, m := int(d.Hours()), int(d.Minutes())%60
		if m == 0 {
			return fmt.Sprintf("%d h", h)
		}
		return fmt.Sprintf("%d h %d min", h, m)
	default:
		return fmt.Sprintf("%d days", int(d.Hours()/24))
	}
}

// Typed writes d the way people type it in a setting or a flag, in its
// largest whole unit: "72h", "90m", "30s"; d.String() when no unit is whole.
// The configuration's defaults and the messages that quote a setting back
// use it, so what they print can be typed back.
func Typed(d time.Duration) string {
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if d%u.unit == 0 {
			return strconv.FormatInt(int64(d/u.unit), 10) + u.name
		}
	}
	return d.String()
}
