package maintenance

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hookd/hookd/internal/store/alerts"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views/humanize"
)

// heldKeysNamed is how many newly held keys one alert names; the rest are
// counted.
const heldKeysNamed = 10

// evaluateHeldKeys takes the keys of ordered destinations that a dead
// event holds and that were not announced yet, and names each once: its
// destination, the dead event and how many deliveries wait behind it.
// The condition is active while any key is held, and clears when none is.
func (a *Alerter) evaluateHeldKeys(ctx context.Context, tx *queue.Tx, st alerts.State, now time.Time) (alerts.State, string, error) {
	newly, err := tx.TakeNewlyHeld(ctx)
	if err != nil {
		return st, "", err
	}
	held, err := tx.CountHeldKeys(ctx)
	if err != nil {
		return st, "", err
	}
	link := a.link("/destinations")
	switch {
	case held == 0 && st.Active:
		return alerts.State{Condition: st.Condition, CreatedAt: st.CreatedAt},
			"hookd: cleared: no key of an ordered destination is held by a dead event any more. " + link, nil
	case held == 0:
		return st, "", nil
	}
	next := st
	if !st.Active {
		next = alerts.State{Condition: st.Condition, Active: true, Since: &now, CreatedAt: st.CreatedAt}
	}
	next.LastSeen, next.Count = &now, held
	if len(newly) == 0 {
		return next, "", nil
	}
	return next, a.heldKeysText(newly, held, now), nil
}

// heldKeysText is the alert of the keys newly held: one named in a
// sentence, several one a line, up to heldKeysNamed.
func (a *Alerter) heldKeysText(newly []queue.HeldKey, held int64, now time.Time) string {
	link := a.link("/destinations")
	what := "Retry the dead event to go on in order, or release the key on the destinations page to go on without it."
	if len(newly) == 1 {
		k := newly[0]
		return fmt.Sprintf("hookd: key %s of destination %s is held: its event %s went dead %s ago, and %s of the key %s behind it. %s %s",
			escape(k.Key), escape(k.Destination), escape(k.EventID), humanize.Duration(now.Sub(k.DeadSince)),
			plural(int64(k.Waiting), "delivery", "deliveries"), waitVerb(k.Waiting), what, link)
	}
	lines := make([]string, 0, heldKeysNamed+1)
	for _, k := range newly[:min(len(newly), heldKeysNamed)] {
		lines = append(lines, fmt.Sprintf("• %s key %s: event %s dead, %s waiting", escape(k.Destination), escape(k.Key),
			escape(k.EventID), plural(int64(k.Waiting), "delivery", "deliveries")))
	}
	if len(newly) > heldKeysNamed {
		lines = append(lines, fmt.Sprintf("• and %s", plural(int64(len(newly)-heldKeysNamed), "more key", "more keys")))
	}
	return fmt.Sprintf("hookd: %s of ordered destinations newly held by a dead event (%s held in all); each key's later deliveries wait behind it. %s %s\n%s",
		plural(int64(len(newly)), "key", "keys"), plural(held, "key", "keys"), what, link, strings.Join(lines, "\n"))
}

// waitVerb is "waits" for one delivery, "wait" for any other count.
func waitVerb(n int) string {
	if n == 1 {
		return "waits"
	}
	return "wait"
}
