package reconcile

import (
	"fmt"
	"time"

	"github.com/hookd/hookd/views/humanize"
)

// CheckWindow refuses a window (how far back a run looks, named setting)
// longer than the marker retention: an event whose marker was pruned looks
// never seen, and a run would process it again. It is the one check of
// HOOKD_RECONCILE_WINDOW and of `hookd reconcile -since`; a Reconciler
// clamps its own windows to MaxWindow the same way.
func CheckWindow(setting string, window, retention time.Duration) error {
	if window > retention {
		return fmt.Errorf("%s: at most HOOKD_MARKER_RETENTION (%s): older events' markers may be pruned, "+
			"and they would be processed again (got %s)", setting, humanize.Typed(retention), humanize.Typed(window))
	}
	return nil
}
