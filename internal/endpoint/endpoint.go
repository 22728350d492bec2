// Package endpoint names the Stripe endpoints one hookd serves (an account
// endpoint, a Connect endpoint, a thin event destination, a sandbox's), each
// with a label, its signing secrets and settings of its own. The secret a
// delivery's signature matches decides which endpoint it came through.
package endpoint

// Two settings describe them. STRIPE_WEBHOOK_SECRETS names each endpoint
// and its secrets (ParseSecrets):
//
//	account=whsec_a,whsec_a_old;connect=whsec_b;thin=whsec_c
//
// and HOOKD_ENDPOINTS gives the settings that are not secret (Configure):
//
//	connect:connect=true,test_events=discard,stripe_id=we_123;thin:kind=thin,stripe_id=ed_456,quiet=6h
//
// The one-endpoint form, STRIPE_WEBHOOK_SECRET, is one endpoint labelled
// DefaultLabel.

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultLabel labels the one endpoint STRIPE_WEBHOOK_SECRET configures.
const DefaultLabel = "default"

// Kind is what Stripe sends through an endpoint.
type Kind string

const (
	// Snapshot: a classic webhook endpoint, or an event destination sending
	// snapshot events: each event carries its object in data.object, and
	// /v1/events lists it.
	Snapshot Kind = "snapshot"
	// Thin: an event destination sending thin events (object
	// "v2.core.event"): no data.object, a related_object to fetch instead,
	// listed by /v2/core/events.
	Thin Kind = "thin"
)

// TestEvents is what hookd does with a test-mode event (livemode false)
// that arrives through an endpoint: a live Connect endpoint also receives
// its connected accounts' test-mode events.
type TestEvents string

const (
	// ForwardTestEvents: like any other event.
	ForwardTestEvents TestEvents = "forward"
	// DiscardTestEvents: answered 200 and recorded as processed, never
	// handed to the processor.
	DiscardTestEvents TestEvents = "discard"
	// QueueTestEvents: answered 200 and kept on the queue, unprocessed,
	// for a person to look at or retry.
	QueueTestEvents TestEvents = "queue-only"
)

// Endpoint is one Stripe webhook endpoint or event destination.
type Endpoint struct {
	// Label names it on every page, in every filter, and to the app
	// (Hookd-Endpoint).
	Label string
	// Secrets are its signing secrets, more than one while one is rolled.
	Secrets []string
	Kind    Kind
	// Connect: it receives the events of connected accounts, each with
	// its account.
	Connect bool
	// StripeID is its id at Stripe, we_... for a webhook endpoint, ed_...
	// for an event destination, which reconciliation and doctor read; ""
	// when not set.
	StripeID string
	// TestEvents is what becomes of its test-mode events.
	TestEvents TestEvents
	// Quiet, when not zero, raises an alert when no event has come through
	// it for that long.
	Quiet time.Duration
	// Undeclared: HOOKD_ENDPOINTS does not name it, so its Kind and
	// Connect are learned from what it receives (Learned). An endpoint
	// HOOKD_ENDPOINTS names declares them: what it says, and the defaults
	// (snapshot, not Connect) for the keys it leaves out.
	Undeclared bool
}

// Destination reports whether the endpoint is an event destination (ed_),
// read through /v2/core/event_destinations, rather than a webhook endpoint
// (we_).
func (e Endpoint) Destination() bool { return strings.HasPrefix(e.StripeID, "ed_") }

// maxLabel bounds a label: it is stored with every event and shown in
// lists.
const maxLabel = 32

// ParseSecrets reads STRIPE_WEBHOOK_SECRETS: label=secret[,secret...],
// separated by semicolons. Each endpoint starts with the defaults: a
// snapshot endpoint, not Connect, test events forwarded; and Undeclared,
// until HOOKD_ENDPOINTS names it (Configure).
func ParseSecrets(v string) ([]Endpoint, error) {
	var eps []Endpoint
	for part, c := range endpointParts(v, "=") {
		label := c.label
		if !c.ok {
			return nil, fmt.Errorf("%q: write each endpoint as label=whsec_...[,whsec_...], endpoints separated by ;", redact(part))
		}
		if err := checkLabel(label); err != nil {
			return nil, err
		}
		if slices.ContainsFunc(eps, func(e Endpoint) bool { return e.Label == label }) {
			return nil, fmt.Errorf("endpoint %q is named twice", label)
		}
		e := New(label)
		e.Undeclared = true
		for s := range items(c.rest, ",") {
			if !strings.HasPrefix(s, "whsec_") {
				return nil, fmt.Errorf("endpoint %q: each secret must start with whsec_ (Stripe's signing secret, from the endpoint's page)", label)
			}
			e.Secrets = append(e.Secrets, s)
		}
		if len(e.Secrets) == 0 {
			return nil, fmt.Errorf("endpoint %q has no secret", label)
		}
		eps = append(eps, e)
	}
	if err := secretsApart(eps); err != nil {
		return nil, err
	}
	return eps, nil
}

// New returns the endpoint labelled label with the default settings,
// declared, and no secret.
func New(label string) Endpoint {
	return Endpoint{Label: label, Kind: Snapshot, TestEvents: ForwardTestEvents}
}

// secretsApart refuses one secret under two labels: the secret decides the
// endpoint, so it could not.
func secretsApart(eps []Endpoint) error {
	owner := map[string]string{}
	for _, e := range eps {
		for _, s := range e.Secrets {
			if other, ok := owner[s]; ok && other != e.Label {
				return fmt.Errorf("endpoints %q and %q share a secret: the secret a delivery matches decides its endpoint", other, e.Label)
			}
			owner[s] = e.Label
		}
	}
	return nil
}

func checkLabel(label string) error {
	if label == "" || len(label) > maxLabel {
		return fmt.Errorf("an endpoint label has 1 to %d characters, got %q", maxLabel, label)
	}
	for _, r := range label {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' && r != '-' {
			return fmt.Errorf("endpoint label %q: use lower-case letters, digits, _ and -", label)
		}
	}
	return nil
}

// Configure applies HOOKD_ENDPOINTS to eps: label:key=value[,key=value...],
// separated by semicolons, each label one of eps'. The keys are kind
// (snapshot or thin), connect (true or false), stripe_id (we_... or
// ed_...), test_events (forward, discard or queue-only) and quiet (a
// duration, 0 for off).
func Configure(eps []Endpoint, v string) error {
	for part, c := range endpointParts(v, ":") {
		label := c.label
		if !c.ok {
			return fmt.Errorf("%q: write each endpoint as label:key=value[,key=value], endpoints separated by ;", part)
		}
		i := slices.IndexFunc(eps, func(e Endpoint) bool { return e.Label == label })
		if i < 0 {
			return fmt.Errorf("endpoint %q has no secret in STRIPE_WEBHOOK_SECRETS", label)
		}
		eps[i].Undeclared = false
		for kv := range items(c.rest, ",") {
			key, value, _ := strings.Cut(kv, "=")
			if err := eps[i].set(strings.TrimSpace(key), strings.TrimSpace(value)); err != nil {
				return fmt.Errorf("endpoint %q: %w", label, err)
			}
		}
	}
	return nil
}

func (e *Endpoint) set(key, value string) error {
	switch key {
	case "kind":
		switch k := Kind(value); k {
		case Snapshot, Thin:
			e.Kind = k
		default:
			return fmt.Errorf("kind is snapshot or thin, got %q", value)
		}
	case "connect":
		b, err := strconv.ParseBool(value)
		if err != nil {
			return fmt.Errorf("connect is true or false, got %q", value)
		}
		e.Connect = b
	case "stripe_id":
		if !strings.HasPrefix(value, "we_") && !strings.HasPrefix(value, "ed_") {
			return fmt.Errorf("stripe_id is a webhook endpoint's we_... or an event destination's ed_..., got %q", value)
		}
		e.StripeID = value
	case "test_events":
		t, err := ParseTestEvents(value)
		if err != nil {
			return err
		}
		e.TestEvents = t
	case "quiet":
		d, err := time.ParseDuration(value)
		if err != nil || d < 0 {
			return fmt.Errorf("quiet is a duration such as 6h, or 0 for off, got %q", value)
		}
		e.Quiet = d
	default:
		return fmt.Errorf("unknown setting %q: the settings are kind, connect, stripe_id, test_events and quiet", key)
	}
	return nil
}

// ParseTestEvents reads forward, discard or queue-only.
func ParseTestEvents(v string) (TestEvents, error) {
	switch t := TestEvents(v); t {
	case ForwardTestEvents, DiscardTestEvents, QueueTestEvents:
		return t, nil
	}
	return "", fmt.Errorf("test_events is forward, discard or queue-only, got %q", v)
}

// ErrNoEndpoint means no endpoint has the label asked for.
var ErrNoEndpoint = errors.New("no such endpoint")

// Find returns the endpoint of eps labelled label.
func Find(eps []Endpoint, label string) (Endpoint, error) {
	for _, e := range eps {
		if e.Label == label {
			return e, nil
		}
	}
	return Endpoint{}, fmt.Errorf("%w: %q", ErrNoEndpoint, label)
}

// cut is one endpoint of a setting cut at its separator: its label and
// the rest; ok is false when the part had no separator.
type cut struct {
	label, rest string
	ok          bool
}

// endpointParts yields each endpoint of a setting (the parts between
// semicolons, trimmed, empty ones skipped) with its cut at sep.
func endpointParts(v, sep string) iter.Seq2[string, cut] {
	return func(yield func(string, cut) bool) {
		for part := range items(v, ";") {
			label, rest, ok := strings.Cut(part, sep)
			if !yield(part, cut{strings.TrimSpace(label), rest, ok}) {
				return
			}
		}
	}
}

// items yields the parts of v between seps, trimmed, empty ones skipped.
func items(v, sep string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for part := range strings.SplitSeq(v, sep) {
			if part = strings.TrimSpace(part); part != "" && !yield(part) {
				return
			}
		}
	}
}

// redact hides what could be a secret in an error about a malformed part.
func redact(part string) string {
	if i := strings.Index(part, "whsec_"); i >= 0 {
		return part[:i] + "whsec_..."
	}
	return part
}
