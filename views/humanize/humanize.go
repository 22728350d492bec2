// Package humanize says durations the way people read them. It is its own
// leaf package so the dashboard's pages and the alerts' messages, which
// worker sends, say a duration the same way without worker importing the
// templates.
package humanize

import (
	"fmt"
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
