package endpoint

import (
	"fmt"
	"time"

	"github.com/hookd/hookd/queue"
)

// ArrivedWindow is how far back what an endpoint received counts when its
// settings are learned or checked against its declaration: long enough to
// span a quiet week of a rarely used endpoint, short enough that an
// endpoint whose destination was changed at Stripe is relearned within it.
const ArrivedWindow = 7 * 24 * time.Hour

// Arrived is what came through an endpoint within ArrivedWindow.
type Arrived struct {
	// Thin and Snapshot: thin events (object "v2.core.event"), and
	// snapshot events.
	Thin, Snapshot bool
	// Connect: events of connected accounts (a snapshot event's account,
	// a thin event's context).
	Connect bool
}

// Learned returns e with its kind and Connect learned from what arrived
// through it, unless it is declared: an endpoint that received thin
// events and no snapshot event is a thin destination, one that received a
// connected account's event is a Connect endpoint. A declared endpoint is
// returned as declared, whatever arrived: Contradictions says where the
// two differ.
func (e Endpoint) Learned(a Arrived) Endpoint {
	if !e.Undeclared {
		return e
	}
	if a.Thin && !a.Snapshot {
		e.Kind = Thin
	}
	if a.Connect {
		e.Connect = true
	}
	return e
}

// Contradictions says, one sentence each, where what arrived through e
// contradicts its declaration, and what the declaration costs: every
// delivery is accepted (its signature proves Stripe sent it), but
// reconciliation reads Stripe's lists by the declaration, so it misses
// what the declaration denies. An endpoint that declares nothing learns
// instead, and contradicts nothing.
func (e Endpoint) Contradictions(a Arrived) []string {
	if e.Undeclared {
		return nil
	}
	var says []string
	if a.Thin && e.Kind != Thin {
		says = append(says, fmt.Sprintf("endpoint `%s` receives thin events but is not declared `kind=thin`: "+
			"reconciliation reads /v1/events for it, which lists no thin event", e.Label))
	}
	if a.Snapshot && e.Kind == Thin {
		says = append(says, fmt.Sprintf("endpoint `%s` receives snapshot events but is declared `kind=thin`: "+
			"reconciliation reads /v2/core/events for it, which lists no snapshot event", e.Label))
	}
	if a.Connect && !e.Connect {
		says = append(says, fmt.Sprintf("endpoint `%s` receives Connect events but is not declared `connect=true`: "+
			"reconciliation lists no connected account for it", e.Label))
	}
	return says
}

// ArrivedThrough is what rows (queue.Store.EndpointsArrived) say came
// through the endpoint labelled label: nothing when no row names it.
func ArrivedThrough(rows []queue.EndpointArrived, label string) Arrived {
	for _, r := range rows {
		if r.Endpoint == label {
			return Arrived{Thin: r.Thin, Snapshot: r.Snapshot, Connect: r.Connect}
		}
	}
	return Arrived{}
}

// LearnedAll is eps, each Learned from what rows say came through it.
func LearnedAll(eps []Endpoint, rows []queue.EndpointArrived) []Endpoint {
	out := make([]Endpoint, len(eps))
	for i, e := range eps {
		out[i] = e.Learned(ArrivedThrough(rows, e.Label))
	}
	return out
}

// AllContradictions is the Contradictions of every endpoint of eps, by
// what rows say came through it, in eps' order.
func AllContradictions(eps []Endpoint, rows []queue.EndpointArrived) []string {
	var says []string
	for _, e := range eps {
		says = append(says, e.Contradictions(ArrivedThrough(rows, e.Label))...)
	}
	return says
}
