package views

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookd/hookd/queue"
)

// DestinationsPage is the destinations page: every destination with its
// state and its deliveries, and the keys of the ordered ones that a dead
// event holds.
type DestinationsPage struct {
	Destinations []queue.DestinationStats
	// HeldKeys are every destination's held keys, oldest first.
	HeldKeys []queue.HeldKey
	// ForwardRate is HOOKD_FORWARD_RATE, the rate of a destination that
	// sets none; 0 for none.
	ForwardRate float64
}

// maxHeldKeysShown bounds the held keys a destination's row lists; the
// rest are counted.
const maxHeldKeysShown = 50

// heldKeys are the keys of the destination name that a dead event holds,
// oldest first, at most maxHeldKeysShown, and how many there are in all.
func (d DestinationsPage) heldKeys(name string) ([]queue.HeldKey, int) {
	var keys []queue.HeldKey
	n := 0
	for _, k := range d.HeldKeys {
		if k.Destination == name {
			if n < maxHeldKeysShown {
				keys = append(keys, k)
			}
			n++
		}
	}
	return keys, n
}

// HeldKeyRelease is the confirmation of a held key's release: the key,
// the dead event that holds it, and how many wait behind it.
type HeldKeyRelease struct {
	Destination, Key, EventID string
	DeadSince                 time.Time
	Waiting                   int
}

// routeSettings are the rate and the order_by of a destination's route,
// as the destinations table keeps them; 0 and "" for none.
func routeSettings(raw json.RawMessage) (rate float64, orderBy string) {
	var r struct {
		Rate    float64 `json:"rate"`
		OrderBy string  `json:"order_by"`
	}
	if len(raw) > 0 && json.Unmarshal(raw, &r) != nil {
		return 0, ""
	}
	return r.Rate, r.OrderBy
}

// rate is a destination's rate as its row says it: its own, or else
// HOOKD_FORWARD_RATE's, which it is delivered at.
func (d DestinationsPage) rate(route json.RawMessage) string {
	rate, _ := routeSettings(route)
	from := ""
	if rate <= 0 && d.ForwardRate > 0 {
		rate, from = d.ForwardRate, " (HOOKD_FORWARD_RATE)"
	}
	if rate <= 0 {
		return "no rate limit"
	}
	calls := "calls"
	if rate == 1 {
		calls = "call"
	}
	return fmt.Sprintf("at most %s %s a second, over every replica%s", strconv.FormatFloat(rate, 'g', -1, 64), calls, from)
}

// orderBy is a destination's order_by; "" when it is not ordered.
func orderBy(raw json.RawMessage) string {
	_, o := routeSettings(raw)
	return o
}

// FromFile reports whether the destinations come from
// HOOKD_DESTINATIONS_FILE: the page is then read-only as to what they are.
func (d DestinationsPage) FromFile() bool {
	for _, s := range d.Destinations {
		if s.Source == "file" {
			return true
		}
	}
	return false
}

// moveTargets are the destinations a retired one's deliveries may move
// to: the configured ones.
func (d DestinationsPage) moveTargets() []string {
	var names []string
	for _, s := range d.Destinations {
		if !s.Retired() {
			names = append(names, s.Name)
		}
	}
	return names
}

// destinationState says where a destination stands, in a support
// person's words, and the pill's class.
func destinationState(d queue.DestinationStats) (string, string) {
	switch {
	case d.Retired():
		return "retired", "pill-muted"
	case d.Paused():
		return "paused", "pill-warn"
	case d.BreakerOpen():
		return "breaker open", "pill-bad"
	}
	return "delivering", "pill-ok"
}

// routeSummary is a destination's route in one line: the event types it
// takes, and each of its other conditions that is not "any".
func routeSummary(raw json.RawMessage) string {
	var r struct {
		Types     []string `json:"types"`
		Livemode  string   `json:"livemode"`
		Accounts  []string `json:"accounts"`
		Endpoints []string `json:"endpoints"`
		Filter    string   `json:"filter"`
	}
	if len(raw) > 0 && json.Unmarshal(raw, &r) != nil {
		return string(raw)
	}
	types := "every event"
	if len(r.Types) > 0 && !(len(r.Types) == 1 && r.Types[0] == "*") {
		types = strings.Join(r.Types, ", ")
	}
	parts := []string{types}
	if r.Livemode != "" && r.Livemode != "any" {
		parts = append(parts, r.Livemode+" mode only")
	}
	if len(r.Accounts) > 0 && !(len(r.Accounts) == 1 && r.Accounts[0] == "any") {
		parts = append(parts, "accounts "+strings.Join(r.Accounts, ", "))
	}
	if len(r.Endpoints) > 0 && !(len(r.Endpoints) == 1 && r.Endpoints[0] == "any") {
		parts = append(parts, "endpoints "+strings.Join(r.Endpoints, ", "))
	}
	if r.Filter != "" {
		parts = append(parts, "where "+r.Filter)
	}
	return strings.Join(parts, "; ")
}

// successRate is the share of the last hour's calls that succeeded, as
// the page shows it; "no calls" without any.
func successRate(d queue.DestinationStats) string {
	rate, ok := d.SuccessRate()
	if !ok {
		return "no calls"
	}
	return fmt.Sprintf("%.1f%% of %s", rate*100, Plural(d.Calls, "call", "calls"))
}

// latency is a percentile of the last hour's calls; "–" without any.
func latency(ms *float64) string {
	if ms == nil {
		return "–"
	}
	return took(time.Duration(*ms * float64(time.Millisecond)))
}

// DestinationDelivery is one destination's delivery of an event, as the
// event's page shows it: its queue row while it waits or is dead (nil
// once delivered), and its attempts, oldest first.
type DestinationDelivery struct {
	Destination string
	Delivery    *queue.Event
	Attempts    []queue.Attempt
}

// delivered reports whether the destination took the event: it has no
// queue row left, and one of its attempts succeeded.
func (d DestinationDelivery) delivered() bool {
	if d.Delivery != nil {
		return false
	}
	for _, a := range d.Attempts {
		if a.Succeeded {
			return true
		}
	}
	return false
}

// stateLabel says where the destination's delivery stands.
func (d DestinationDelivery) stateLabel() (string, string) {
	switch {
	case d.Delivery != nil:
		return statusLabel(d.Delivery.Status), "pill-" + string(d.Delivery.Status)
	case d.delivered():
		return "delivered", "pill-ok"
	}
	return "not on the queue", "pill-muted"
}

// ByDestination is the event's deliveries, one per destination that has
// a queue row of it or an attempt, in the order of the destinations'
// names.
func (d EventDetail) ByDestination() []DestinationDelivery {
	var out []DestinationDelivery
	index := map[string]int{}
	at := func(name string) *DestinationDelivery {
		if name == "" {
			name = queue.DefaultDestination
		}
		i, ok := index[name]
		if !ok {
			i = len(out)
			index[name] = i
			out = append(out, DestinationDelivery{Destination: name})
		}
		return &out[i]
	}
	for i := range d.Deliveries {
		at(d.Deliveries[i].Destination).Delivery = &d.Deliveries[i]
	}
	for _, a := range d.Attempts {
		dd := at(a.Destination)
		dd.Attempts = append(dd.Attempts, a)
	}
	slices.SortFunc(out, func(a, b DestinationDelivery) int { return strings.Compare(a.Destination, b.Destination) })
	return out
}

// severalDestinations reports whether the event went, or goes, to more
// than one destination, or to one other than default: its page then
// shows its deliveries destination by destination.
func (d EventDetail) severalDestinations() bool {
	by := d.ByDestination()
	return len(by) > 1 || len(by) == 1 && by[0].Destination != queue.DefaultDestination
}
