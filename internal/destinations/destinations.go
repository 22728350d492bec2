// Package destinations is the set of apps hookd forwards to: each
// destination's settings and route, read from HOOKD_DESTINATIONS_FILE's
// YAML or made from HOOKD_FORWARD_URL alone, and the routing of one event
// to the destinations that take it.
package destinations

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
)

// MaxTimeout bounds a destination's timeout. It is worker.MaxForwardTimeout's
// value, copied rather than imported so that this package, which the config
// reads, does not pull in the worker: a retry claim holds each event for a
// batch's worth of the timeout, so the same bound holds for every
// destination as for HOOKD_FORWARD_TIMEOUT.
const MaxTimeout = 2 * time.Minute

// DefaultName is the one destination HOOKD_FORWARD_URL makes.
const DefaultName = "default"

// The sources of a Set, and of each of its destinations.
const (
	SourceFile       = "file"
	SourceForwardURL = "forward_url"
	// SourceDashboard is an admin's destination, managed on the
	// dashboard while no file is set.
	SourceDashboard = "dashboard"
)

// The values of Livemode, and the word that matches anything in Types'
// place ("*"), Accounts and Endpoints ("any").
const (
	Live    = "live"
	Test    = "test"
	Any     = "any"
	AllType = "*"
	// Platform, in Accounts, is an event of the platform's own account,
	// which names no connected account.
	Platform = "platform"
)

// Destination is one app hookd forwards to, and which events it takes.
// A zero Concurrency or Timeout stands for HOOKD_FORWARD_*'s value, so the
// file need say only what differs from every destination's defaults.
type Destination struct {
	// Name is ^[a-z0-9][a-z0-9-]{0,39}$: it is sent as Hookd-Destination
	// and stored with every delivery, so it stays short and plain.
	Name string
	// URL is where events are POSTed: absolute http or https, with a host.
	URL string
	// Types are exact event types or globs where '*' alone is a wildcard
	// ("invoice.*", "*"); default ["*"].
	Types []string
	// Livemode is "live", "test" or "any" (the default).
	Livemode string
	// Accounts are "platform", connected account ids "acct_..." or "any"
	// (the default).
	Accounts []string
	// Endpoints are endpoint labels (HOOKD_ENDPOINTS') or "any" (the
	// default).
	Endpoints []string
	// Filter is a CEL expression over the event, compiled at load; "" is
	// none.
	Filter string
	// Rate is the calls a second across replicas; 0 is no bound.
	Rate float64
	// Concurrency is the calls at once; 0 is the default.
	Concurrency int
	// Timeout is how long a call may take; 0 is the default; at most
	// MaxTimeout.
	Timeout time.Duration
	// OrderBy is a field path of the event (data.object.customer) whose
	// value's events are delivered one at a time in accepted order; "" is
	// none.
	OrderBy string
	// SigningSecretEnv names the variable holding the Standard Webhooks
	// secrets; "" leaves the signing to HOOKD_FORWARD_SECRET.
	SigningSecretEnv string
	// SigningSecrets are that variable's value split on whitespace: during
	// a rotation the new secret first, the previous one after, and every
	// one signs so the app verifies with either.
	SigningSecrets []string
	// HeadersEnv maps an extra header's name to the variable holding its
	// value, so the file holds no credential.
	HeadersEnv map[string]string
	// Headers are HeadersEnv's values, read at load, or an Entry's.
	Headers http.Header
	// Source is where the destination is configured: the Set's Source,
	// but in a set of the dashboard's (FromEntries), where default is
	// HOOKD_FORWARD_URL's.
	Source string

	// valued says its secrets and headers were given as values (an
	// Entry), not read from variables the hash names.
	valued bool

	// program is Filter compiled, nil when there is none; loops says it
	// holds a comprehension, and runs under a deadline.
	program cel.Program
	loops   bool
}

// Set is every destination hookd forwards to, as applied together. Nothing
// changes a Set once made, so every delivery may Route through it at once.
type Set struct {
	// Destinations are in the file's order, which is Route's order.
	Destinations []*Destination
	// Hash is the hex SHA-256 of the set's canonical form: equal on every
	// replica that applied the same file, and different when any setting
	// or the name of a variable changes (not the variables' values, which
	// are secrets).
	Hash string
	// Source is SourceFile, SourceForwardURL, or SourceDashboard for a
	// set of the dashboard's destinations (with HOOKD_FORWARD_URL's
	// default, if any).
	Source string
}

// Parse reads a destinations file's YAML, resolving the variables it names
// through getenv. An error is one line naming the destination and the
// field; a Set is returned only when every destination is valid.
func Parse(data []byte, getenv func(string) string) (*Set, error) {
	entries, err := decode(data)
	if err != nil {
		return nil, err
	}
	set := &Set{Source: SourceFile}
	for i, e := range entries {
		d, err := e.destination(fmt.Sprintf("destinations[%d]", i), set.Destinations, getenv)
		if err != nil {
			return nil, err
		}
		d.Source = SourceFile
		set.Destinations = append(set.Destinations, d)
	}
	set.Hash = hash(set)
	return set, nil
}

// Load reads the file at path, then Parses it; an error names the path.
func Load(path string, getenv func(string) string) (*Set, error) {
	data, err := os.ReadFile(path)
	if pathErr := (*fs.PathError)(nil); errors.As(err, &pathErr) {
		// The path once: "open PATH: no such file" would say it twice.
		return nil, fmt.Errorf("%s: %w", path, pathErr.Err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	set, err := Parse(data, getenv)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return set, nil
}

// Single is HOOKD_FORWARD_URL alone: one destination, DefaultName, taking
// every event, with every setting HOOKD_FORWARD_*'s.
func Single(url string) *Set {
	d := &Destination{Name: DefaultName, URL: url, Types: []string{AllType}, Livemode: Any,
		Accounts: []string{Any}, Endpoints: []string{Any}, Source: SourceForwardURL}
	set := &Set{Destinations: []*Destination{d}, Source: SourceForwardURL}
	set.Hash = hash(set)
	return set
}

// Names are the destinations' names, in order.
func (s *Set) Names() []string {
	names := make([]string, len(s.Destinations))
	for i, d := range s.Destinations {
		names[i] = d.Name
	}
	return names
}

// Get is the destination named name, or nil.
func (s *Set) Get(name string) *Destination {
	for _, d := range s.Destinations {
		if d.Name == name {
			return d
		}
	}
	return nil
}

// DisplayURL is the destination's URL as hookd shows it to people (the
// check's output, logs, pages): its scheme, host and path, without the
// user, password, query or fragment, any of which may carry a secret.
func (d *Destination) DisplayURL() string {
	u, err := url.Parse(d.URL)
	if err != nil {
		return "(an unparseable URL)"
	}
	return displayURL(u)
}

// CheckEndpoints refuses a destination whose endpoints name a label that
// is not among labels, the endpoints hookd serves: it would never take an
// event through it, and is a typo most likely.
func (s *Set) CheckEndpoints(labels []string) error {
	for _, d := range s.Destinations {
		for _, e := range d.Endpoints {
			if e != Any && !slices.Contains(labels, e) {
				return fieldError(fmt.Sprintf("destination %q", d.Name), "endpoints",
					"%q is no endpoint's label (hookd serves %s)", e, strings.Join(labels, ", "))
			}
		}
	}
	return nil
}
