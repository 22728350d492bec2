package destinations

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// Entry is one destination given with the values of its secrets and
// headers rather than the names of variables: as an admin types it on
// the dashboard, and hookd keeps it (sealed) in the database. Its other
// fields are the file's, checked alike; an error names the same fields,
// and signing_secrets and headers for the values.
type Entry struct {
	Name string
	URL  string
	// Types, Accounts and Endpoints: nil is the default (every one); an
	// empty list is refused, as in the file.
	Types     []string
	Livemode  string
	Accounts  []string
	Endpoints []string
	Filter    string
	// Concurrency: 0 is HOOKD_FORWARD_CONCURRENCY's share, the default.
	Concurrency int
	// Timeout is a duration like the file's ("10s"); "" is the default.
	Timeout string
	// Rate is the calls a second it takes, over every replica; 0 is no
	// bound (a file's rate left out).
	Rate float64
	// OrderBy is a field path of the event (data.object.customer) whose
	// value orders its deliveries one at a time per key; "" orders none.
	OrderBy string
	// SigningSecrets are Standard Webhooks secrets whsec_..., the new one
	// first during a rotation; none leaves signing to HOOKD_FORWARD_SECRET.
	SigningSecrets []string
	// Headers are extra headers' values by name, such as Authorization.
	Headers map[string]string
	// Source is where it is configured: SourceDashboard, or
	// SourceForwardURL for HOOKD_FORWARD_URL's default.
	Source string
}

// CheckEntry checks one entry alone, as a file's destination is checked,
// and makes it a Destination, its filter compiled.
func CheckEntry(e Entry) (*Destination, error) {
	return e.destination("the destination", nil)
}

// FromEntries makes the Set of entries, in their order, each checked as a
// file's destination is, and no name given twice; source is the Set's.
// An error is one line naming the destination and the field.
func FromEntries(entries []Entry, source string) (*Set, error) {
	set := &Set{Source: source}
	for i, e := range entries {
		d, err := e.destination(fmt.Sprintf("destinations[%d]", i), set.Destinations)
		if err != nil {
			return nil, err
		}
		set.Destinations = append(set.Destinations, d)
	}
	set.Hash = hash(set)
	return set, nil
}

func (e Entry) destination(unnamed string, before []*Destination) (*Destination, error) {
	var rate *float64
	if e.Rate != 0 {
		rate = &e.Rate
	}
	d, err := entry{Name: e.Name, URL: e.URL, Types: e.Types, Livemode: e.Livemode, Accounts: e.Accounts,
		Endpoints: e.Endpoints, Filter: e.Filter, Concurrency: e.Concurrency, Timeout: e.Timeout,
		Rate: rate, OrderBy: e.OrderBy,
	}.destination(unnamed, before, nil)
	if err != nil {
		return nil, err
	}
	d.Source, d.valued = e.Source, true
	if err := d.setValues(e, fmt.Sprintf("destination %q", e.Name)); err != nil {
		return nil, err
	}
	return d, nil
}

// setValues checks and sets the entry's signing secrets and headers.
func (d *Destination) setValues(e Entry, who string) error {
	if len(e.SigningSecrets) > 0 {
		if err := checkSecrets(e.SigningSecrets); err != nil {
			return fieldError(who, "signing_secrets", "%v", err)
		}
		d.SigningSecrets = slices.Clone(e.SigningSecrets)
	}
	if len(e.Headers) == 0 {
		return nil
	}
	d.Headers = make(http.Header, len(e.Headers))
	for _, name := range slices.Sorted(maps.Keys(e.Headers)) {
		if err := checkHeaderName(name, d.Headers); err != nil {
			return fieldError(who, "headers", "%s: %v", name, err)
		}
		v := e.Headers[name]
		if err := checkHeaderValue(v); err != nil {
			return fieldError(who, "headers", "%s: the value %v", name, err)
		}
		d.Headers.Set(name, strings.TrimSpace(v))
	}
	return nil
}
