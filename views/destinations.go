package views

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hookd/hookd/queue"
)

// DestinationsPage is the destinations page: every destination with its
// state and its deliveries.
type DestinationsPage struct {
	Destinations []queue.DestinationStats
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
