package destinations

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/hookd/hookd/internal/forwardsig"
)

// nameRE is what a destination's name looks like.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}$`)

// orderByRE is a field path: identifiers joined by dots.
var orderByRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// FieldError is a refused field of one destination: Error says it as one
// line naming both, and Field lets a form show it beside its input.
type FieldError struct {
	// Who names the destination: `destination "billing"`, or
	// `destinations[2]` while its name is not one.
	Who string
	// Field is the key at fault, as the file (or the dashboard's form)
	// calls it: name, url, types, filter...
	Field string
	// Reason says what is wrong and what would do.
	Reason string
}

func (e *FieldError) Error() string { return e.Who + ": " + e.Field + ": " + e.Reason }

// fieldError is a refused field of one destination, said as one line
// naming both.
func fieldError(who, field, format string, a ...any) error {
	return &FieldError{Who: who, Field: field, Reason: fmt.Sprintf(format, a...)}
}

// destination checks e against the destinations before it, and makes it
// a Destination, its variables read through getenv and its filter
// compiled. unnamed names it while its name is not one: destinations[i],
// its place in the file.
func (e entry) destination(unnamed string, before []*Destination, getenv func(string) string) (*Destination, error) {
	if !nameRE.MatchString(e.Name) {
		who := unnamed
		if e.Name == "" {
			return nil, fieldError(who, "name", "missing (a name like billing, matching %s)", nameRE)
		}
		return nil, fieldError(who, "name", "%q does not match %s", e.Name, nameRE)
	}
	who := fmt.Sprintf("destination %q", e.Name)
	if j := slices.IndexFunc(before, func(d *Destination) bool { return d.Name == e.Name }); j >= 0 {
		return nil, fieldError(who, "name", "used by destinations[%d] too", j)
	}
	d := &Destination{Name: e.Name, URL: e.URL, Filter: e.Filter, OrderBy: e.OrderBy,
		Concurrency: e.Concurrency, SigningSecretEnv: e.SigningSecretEnv}
	for _, check := range []func(*Destination, entry, string) error{
		checkURL, checkRoute, checkLimits, checkOrderBy,
	} {
		if err := check(d, e, who); err != nil {
			return nil, err
		}
	}
	if err := d.readEnv(e, who, getenv); err != nil {
		return nil, err
	}
	if err := d.compile(who); err != nil {
		return nil, err
	}
	return d, nil
}

func checkURL(d *Destination, e entry, who string) error {
	if e.URL == "" {
		return fieldError(who, "url", "missing (the app's http or https URL)")
	}
	u, err := url.Parse(e.URL)
	switch {
	case err != nil:
		return fieldError(who, "url", "not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return fieldError(who, "url", "%q is not http or https", displayURL(u))
	case u.Host == "":
		return fieldError(who, "url", "%q has no host", displayURL(u))
	}
	return nil
}

// displayURL is u without its user, password, query and fragment, any of
// which may carry a secret that an error or the check's output must not
// show.
func displayURL(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, Opaque: u.Opaque}).String()
}

// checkRoute checks and sets what the destination routes on, with their
// defaults: every type, live or test, account and endpoint.
func checkRoute(d *Destination, e entry, who string) error {
	var err error
	if d.Types, err = list(who, "types", e.Types, AllType, checkType); err != nil {
		return err
	}
	switch d.Livemode = e.Livemode; d.Livemode {
	case "":
		d.Livemode = Any
	case Live, Test, Any:
	default:
		return fieldError(who, "livemode", "%q is not live, test or any", e.Livemode)
	}
	if d.Accounts, err = list(who, "accounts", e.Accounts, Any, checkAccount); err != nil {
		return err
	}
	d.Endpoints, err = list(who, "endpoints", e.Endpoints, Any, checkEndpoint)
	return err
}

// list checks each item of a route's list; a list left out is def alone,
// and an empty one is refused, as it would take no event at all.
func list(who, field string, items []string, def string, check func(string) error) ([]string, error) {
	if items == nil {
		return []string{def}, nil
	}
	if len(items) == 0 {
		return nil, fieldError(who, field, "empty: it would take no event (leave it out for %s)", def)
	}
	for _, item := range items {
		if err := check(item); err != nil {
			return nil, fieldError(who, field, "%v", err)
		}
	}
	return slices.Clone(items), nil
}

// checkType checks an event type or a glob. Only '*' is a wildcard: the
// rest of path.Match's syntax ([...], ?, \) appears in no event type, and
// would only make a typo match something unexpected.
func checkType(t string) error {
	if t == "" || strings.ContainsAny(t, "[]?\\ \t") {
		return fmt.Errorf("bad glob %q: an event type, or a glob where * alone is a wildcard (invoice.*, *)", t)
	}
	return nil
}

func checkAccount(a string) error {
	if a == Platform || a == Any {
		return nil
	}
	if rest, ok := strings.CutPrefix(a, "acct_"); !ok || rest == "" || strings.ContainsAny(rest, " \t/?#") {
		return fmt.Errorf("%q is not platform, a connected account id acct_... or any", a)
	}
	return nil
}

func checkEndpoint(label string) error {
	if label == "" || strings.ContainsAny(label, " \t,;:=") {
		return fmt.Errorf("%q is not an endpoint label (HOOKD_ENDPOINTS') or any", label)
	}
	return nil
}

// checkLimits checks and sets the rate, concurrency and timeout.
func checkLimits(d *Destination, e entry, who string) error {
	if e.Rate != nil {
		r := *e.Rate
		if math.IsNaN(r) || math.IsInf(r, 0) || r <= 0 {
			return fieldError(who, "rate", "%v is not a number of calls a second greater than zero (leave it out for no bound)", r)
		}
		d.Rate = r
	}
	if e.Concurrency < 0 {
		return fieldError(who, "concurrency", "%d is below zero (0 or left out: the default)", e.Concurrency)
	}
	if e.Timeout != "" {
		t, err := time.ParseDuration(e.Timeout)
		switch {
		case err != nil:
			return fieldError(who, "timeout", "%q is not a duration like 10s or 1m30s", e.Timeout)
		case t <= 0:
			return fieldError(who, "timeout", "%s is not greater than zero (leave it out for the default)", e.Timeout)
		case t > MaxTimeout:
			return fieldError(who, "timeout", "%s is longer than %s: a retry holds its event for a batch's worth of it", e.Timeout, MaxTimeout)
		}
		d.Timeout = t
	}
	return nil
}

func checkOrderBy(d *Destination, e entry, who string) error {
	if e.OrderBy != "" && !orderByRE.MatchString(e.OrderBy) {
		return fieldError(who, "order_by", "%q is not a field path like data.object.customer", e.OrderBy)
	}
	return nil
}

// readEnv reads the signing secrets and the extra headers from the
// variables the destination names. An empty variable is refused: the
// destination would go unsigned, or without its credential, unnoticed.
func (d *Destination) readEnv(e entry, who string, getenv func(string) string) error {
	if e.SigningSecretEnv != "" {
		d.SigningSecrets = strings.Fields(getenv(e.SigningSecretEnv))
		if len(d.SigningSecrets) == 0 {
			return fieldError(who, "signing_secret_env", "%s is empty", e.SigningSecretEnv)
		}
		if err := checkSecrets(d.SigningSecrets); err != nil {
			return fieldError(who, "signing_secret_env", "%s: %v", e.SigningSecretEnv, err)
		}
	}
	if len(e.HeadersEnv) == 0 {
		return nil
	}
	d.HeadersEnv = make(map[string]string, len(e.HeadersEnv))
	d.Headers = make(http.Header, len(e.HeadersEnv))
	for _, name := range slices.Sorted(maps.Keys(e.HeadersEnv)) {
		env := e.HeadersEnv[name]
		if err := checkHeaderName(name, d.Headers); err != nil {
			return fieldError(who, "headers_env", "%s: %v", name, err)
		}
		if env == "" {
			return fieldError(who, "headers_env", "%s: names no variable", name)
		}
		v := getenv(env)
		if err := checkHeaderValue(v); err != nil {
			return fieldError(who, "headers_env", "%s: %s %v", name, env, err)
		}
		d.HeadersEnv[name] = env
		d.Headers.Set(name, v)
	}
	return nil
}

// checkSecrets checks each Standard Webhooks secret, saying which of them
// is wrong.
func checkSecrets(secrets []string) error {
	for i, s := range secrets {
		if _, err := forwardsig.ParseSecret(s); err != nil {
			return fmt.Errorf("secret %d of %d: %v", i+1, len(secrets), err)
		}
	}
	return nil
}

// reservedHeaders are the headers hookd sets on every call (its own, the
// signature's, the trace context's, the body's type) or net/http writes
// from the request: another value from the file would break the app's
// checks or contradict what hookd says of the event. They are the
// worker's forwarder's (worker.reservedHeader), which a test holds this
// list to, so that a file this package takes the forwarder takes too.
var reservedHeaders = []string{"Content-Type", "Traceparent", "Tracestate",
	"Host", "Content-Length", "Transfer-Encoding", "Trailer", "Connection"}

// reservedPrefixes are the families of hookd's own headers.
var reservedPrefixes = []string{"Hookd-", "Webhook-"}

// checkHeaderName checks an extra header's name, against the headers
// hookd sets and those of the destination so far (set).
func checkHeaderName(name string, set http.Header) error {
	canon := http.CanonicalHeaderKey(name)
	switch {
	case !httpguts.ValidHeaderFieldName(name):
		return errors.New("not a header name")
	case slices.Contains(reservedHeaders, canon) ||
		slices.ContainsFunc(reservedPrefixes, func(p string) bool { return strings.HasPrefix(canon, p) }):
		return errors.New("hookd sets this header itself")
	case set.Get(name) != "":
		return errors.New("given twice, in two spellings")
	}
	return nil
}

// checkHeaderValue checks an extra header's value; its error completes a
// sentence whose subject is where the value came from.
func checkHeaderValue(v string) error {
	switch {
	case strings.TrimSpace(v) == "":
		return errors.New("is empty")
	case !httpguts.ValidHeaderFieldValue(v):
		return errors.New("holds a character a header value may not (a newline?)")
	}
	return nil
}
