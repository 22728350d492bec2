package destinations

import (
	"cmp"
	"path"
	"slices"
	"strings"
)

// Event is what routing reads of one Stripe event.
type Event struct {
	Type string
	// Livemode is nil when the event did not say; then only a destination
	// of any livemode takes it.
	Livemode *bool
	// Account is the connected account's id; "" is the platform.
	Account string
	// Endpoint is the label of the endpoint it came through.
	Endpoint string
	// Payload is the event's JSON, which the filter reads.
	Payload []byte
}

// Match reports whether d takes ev. A filter that fails at run time (a
// missing field, a wrong type) is a non-match: err says why, to be
// recorded on the event's page.
func (d *Destination) Match(ev Event) (ok bool, err error) {
	var act *activation
	return d.match(ev, func() *activation {
		if act == nil {
			act = parseEvent(ev.Payload)
		}
		return act
	})
}

// Route is every destination of s that takes ev, in file order, and for
// each destination whose filter failed at run time, its error. The event's
// JSON is parsed once, and only when a destination with a filter takes it
// by its other rules.
func (s *Set) Route(ev Event) (matched []*Destination, failed map[string]error) {
	var act *activation
	fields := func() *activation {
		if act == nil {
			act = parseEvent(ev.Payload)
		}
		return act
	}
	for _, d := range s.Destinations {
		ok, err := d.match(ev, fields)
		if err != nil {
			if failed == nil {
				failed = map[string]error{}
			}
			failed[d.Name] = err
		}
		if ok {
			matched = append(matched, d)
		}
	}
	return matched, failed
}

// match checks the route's rules from the cheapest: the type, livemode,
// account and endpoint, and only then the filter, on the event's fields
// parsed by fields.
func (d *Destination) match(ev Event, fields func() *activation) (bool, error) {
	if !d.takesType(ev.Type) || !d.takesLivemode(ev.Livemode) ||
		!takes(d.Accounts, cmp.Or(ev.Account, Platform)) || !takes(d.Endpoints, ev.Endpoint) {
		return false, nil
	}
	if d.program == nil {
		return true, nil
	}
	return d.eval(fields())
}

func (d *Destination) takesType(t string) bool {
	for _, pattern := range d.Types {
		if pattern == t || pattern == AllType {
			return true
		}
		// The patterns were checked at load: none is malformed.
		if strings.Contains(pattern, "*") {
			if ok, _ := path.Match(pattern, t); ok {
				return true
			}
		}
	}
	return false
}

func (d *Destination) takesLivemode(live *bool) bool {
	switch d.Livemode {
	case Live:
		return live != nil && *live
	case Test:
		return live != nil && !*live
	}
	return true
}

// takes reports whether a route's list, of values or any, holds v.
func takes(list []string, v string) bool {
	return slices.Contains(list, Any) || slices.Contains(list, v)
}
