package doctor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views/humanize"
)

// stripeSide is what Stripe's API said of one endpoint or destination.
type stripeSide struct {
	id, url, status, version string
	types                    int
	allTypes                 bool
	// thin and connect are known for a destination only; a webhook
	// endpoint sends snapshot events, Connect or not as it was created.
	destination, thin, connect bool
}

// Endpoints checks every labelled endpoint, one line per endpoint per
// check: its secrets' shape; then, with STRIPE_API_KEY and its stripe_id,
// that Stripe has it (a webhook endpoint or an event destination), that
// it is enabled, that it points at this hookd's public URL, its API
// version, and that it sends thin or snapshot events as its label says.
// The first result is the API key's.
func Endpoints(ctx context.Context, cfg Config) []Result {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	key := Result{Check: "stripe api key"}
	var client *stripeapi.Client
	switch {
	case cfg.StripeAPIKey == "":
		key.Status, key.Detail = Skip, "STRIPE_API_KEY is not set: no reconciliation, no watch of Stripe's side, and the endpoints are not checked at Stripe"
	case !anyStripeID(cfg.Endpoints):
		key.Status, key.Detail = Skip, "not checked without an endpoint to read"
	default:
		client = stripeapi.New(stripeapi.Config{Key: cfg.StripeAPIKey, URL: cfg.StripeAPIURL, HTTPClient: cfg.HTTPClient,
			MaxNetworkRetries: 1, RateLimitRetries: 1})
	}
	one := len(cfg.Endpoints) == 1 && cfg.Endpoints[0].Label == endpoint.DefaultLabel
	arrived, arrivedErr := readArrived(ctx, cfg.DatabaseURL)
	results := []Result{key}
	for _, ep := range cfg.Endpoints {
		name := func(check string) string {
			if one {
				return check
			}
			return check + " " + ep.Label
		}
		secret := SigningSecret(ep.Secrets)
		secret.Check = name(secret.Check)
		results = append(results, secret, declarationLine(name("endpoint declaration"), ep, arrived, arrivedErr))
		if cfg.StripeAPIKey != "" {
			results = append(results, atStripe(ctx, cfg, client, ep, one, name, &key)...)
		}
	}
	results[0] = key
	return results
}

// atStripe checks ep at Stripe, its lines named by name: that it has a
// stripe_id (the one endpoint must), and what Stripe says of it. Each read
// tells key, the API key's line, what it can of the key: taken, refused,
// or not checked.
func atStripe(ctx context.Context, cfg Config, client *stripeapi.Client, ep endpoint.Endpoint, one bool,
	name func(string) string, key *Result) []Result {
	if ep.StripeID == "" {
		if one {
			return []Result{{name("stripe endpoint"), Fail, "STRIPE_WEBHOOK_ENDPOINT_ID is not set: set it to the we_... id of the endpoint hookd serves"}}
		}
		return []Result{{name("stripe endpoint"), Warn, "no stripe_id: set HOOKD_ENDPOINTS " + ep.Label + ":stripe_id=we_... (or the " +
			"destination's ed_...) so doctor, reconciliation and the watch alerts read it at Stripe"}}
	}
	side, err := readSide(ctx, client, ep)
	var apiErr *stripeapi.APIError
	switch {
	case errors.Is(err, stripeapi.ErrNotFound):
		if key.Status == "" {
			key.Status, key.Detail = keyTaken(cfg.StripeAPIKey)
		}
		return []Result{{name("stripe endpoint"), Fail, err.Error()}}
	case errors.As(err, &apiErr) && (apiErr.Status == http.StatusUnauthorized || apiErr.Status == http.StatusForbidden):
		key.Status, key.Detail = Fail, err.Error()
		return []Result{{name("stripe endpoint"), Skip, "not read: the key was refused"}}
	case err != nil:
		if key.Status == "" {
			key.Status, key.Detail = Warn, fmt.Sprintf("could not check it: %v", err)
		}
		return []Result{{name("stripe endpoint"), Skip, "not read: " + err.Error()}}
	}
	if key.Status == "" || key.Status == Warn && strings.HasPrefix(key.Detail, "could not") {
		key.Status, key.Detail = keyTaken(cfg.StripeAPIKey)
	}
	return []Result{
		enabledLine(name("stripe endpoint"), side),
		publicURLLine(name("public url"), side, cfg.PublicURL),
		versionLine(ctx, name("api version"), side, ep, cfg.DatabaseURL),
		kindLine(name("endpoint kind"), side, ep),
	}
}

func anyStripeID(eps []endpoint.Endpoint) bool {
	for _, ep := range eps {
		if ep.StripeID != "" {
			return true
		}
	}
	return false
}

// keyTaken is the key's line once Stripe answered a read with it.
func keyTaken(key string) (Status, string) {
	if strings.HasPrefix(key, "sk_") {
		return Warn, "Stripe takes it, but it is a secret key, which can do anything in the account: hookd only reads, so " +
			"give it a restricted key (rk_...) with Read access to Events, Webhook Endpoints and Event Destinations"
	}
	return OK, "Stripe takes it (" + keyKind(key) + ")"
}

func readSide(ctx context.Context, c *stripeapi.Client, ep endpoint.Endpoint) (stripeSide, error) {
	if ep.Destination() {
		d, err := c.Destination(ctx, ep.StripeID)
		if err != nil {
			return stripeSide{}, err
		}
		return stripeSide{id: d.ID, url: d.URL, status: d.Status, version: d.APIVersion, types: len(d.EnabledEvents),
			allTypes: len(d.EnabledEvents) == 1 && d.EnabledEvents[0] == "*", destination: true, thin: d.Thin, connect: d.Connect}, nil
	}
	e, err := c.Endpoint(ctx, ep.StripeID)
	if err != nil {
		return stripeSide{}, err
	}
	return stripeSide{id: e.ID, url: e.URL, status: e.Status, version: e.APIVersion, types: len(e.EnabledEvents),
		allTypes: e.Receives("*") && len(e.EnabledEvents) == 1}, nil
}

func (s stripeSide) versionText() string {
	switch {
	case s.thin:
		return "none (thin events)"
	case s.version == "":
		return "the account's default"
	}
	return s.version
}

func enabledLine(name string, s stripeSide) Result {
	if s.status != "enabled" {
		return Result{name, Fail, fmt.Sprintf("%s is %s: Stripe sends it nothing (it disables an endpoint that keeps failing); "+
			"enable it on its page in Stripe's dashboard, then run hookd reconcile for what it missed", s.id, s.status)}
	}
	types := fmt.Sprintf("%d event types", s.types)
	if s.allTypes {
		types = "every event type"
	}
	return Result{name, OK, fmt.Sprintf("%s is enabled and sends %s to %s; API version %s", s.id, types, s.url, s.versionText())}
}

// publicURLLine checks the endpoint sends to this hookd's receiver:
// HOOKD_PUBLIC_URL followed by the receiver's path.
func publicURLLine(name string, s stripeSide, publicURL string) Result {
	got := strings.TrimRight(s.url, "/")
	switch {
	case got == "":
		return Result{name, Warn, s.id + " has no webhook URL (an Amazon EventBridge destination?): hookd receives over HTTPS only"}
	case publicURL == "":
		if !strings.HasSuffix(got, stripeevent.ReceiverPath) {
			return Result{name, Warn, fmt.Sprintf("%s sends to %s, which does not end in %s where hookd receives: unless a proxy "+
				"rewrites the path, change the endpoint's URL", s.id, s.url, stripeevent.ReceiverPath)}
		}
		return Result{name, Skip, fmt.Sprintf("%s sends to %s; set HOOKD_PUBLIC_URL for doctor to check it is this hookd", s.id, s.url)}
	}
	want := strings.TrimRight(publicURL, "/") + stripeevent.ReceiverPath
	if strings.EqualFold(got, want) {
		return Result{name, OK, fmt.Sprintf("%s sends to %s, this hookd's receiver", s.id, s.url)}
	}
	return Result{name, Warn, fmt.Sprintf("%s sends to %s, not to this hookd's receiver %s (HOOKD_PUBLIC_URL and %s): "+
		"unless a proxy forwards one to the other, change the endpoint's URL in Stripe's dashboard", s.id, s.url, want,
		stripeevent.ReceiverPath)}
}

// versionLine says which API version Stripe renders the endpoint's events
// in, and warns when the app has lately been getting another.
func versionLine(ctx context.Context, name string, s stripeSide, ep endpoint.Endpoint, databaseURL string) Result {
	if s.thin {
		return Result{name, OK, s.id + " sends thin events, which have no API version: the objects they name are read in the version of the request"}
	}
	recent, ok := recentVersion(ctx, databaseURL, ep.Label)
	if ok && s.version != "" && recent != s.version {
		return Result{name, Warn, fmt.Sprintf("%s renders its events in %s, but the latest events through it are in %s: "+
			"the app will get %s's shapes from now on; check it reads them", s.id, s.version, recent, s.version)}
	}
	if s.version == "" {
		return Result{name, OK, s.id + " follows the account's default version: a change of the default in Stripe's " +
			"dashboard changes what the app gets; pin a version on the endpoint to avoid that"}
	}
	return Result{name, OK, s.id + " renders its events in " + s.version}
}

// recentVersion reads the API version of the latest events kept for
// label; false when the database does not answer or keeps none.
func recentVersion(ctx context.Context, databaseURL, label string) (string, bool) {
	if databaseURL == "" {
		return "", false
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pool, _, err := connect(ctx, databaseURL)
	if err != nil {
		return "", false
	}
	defer pool.Close()
	v, ok, err := queue.New(pool).RecentAPIVersion(ctx, label, time.Now().Add(-stripeevent.RedeliveryWindow))
	return v, ok && err == nil
}

// readArrived reads what came through each endpoint within
// endpoint.ArrivedWindow.
func readArrived(ctx context.Context, databaseURL string) ([]queue.EndpointArrived, error) {
	if databaseURL == "" {
		return nil, errors.New("DATABASE_URL is not set")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pool, _, err := connect(ctx, databaseURL)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	return queue.New(pool).EndpointsArrived(ctx, endpoint.ArrivedWindow)
}

// declarationLine checks that what arrived through ep is what
// HOOKD_ENDPOINTS declares of it. A contradiction fails: every event is
// still accepted, but reconciliation reads Stripe by the declaration and
// misses what it denies. An endpoint HOOKD_ENDPOINTS does not name learns
// from what arrives, and contradicts nothing.
func declarationLine(name string, ep endpoint.Endpoint, arrived []queue.EndpointArrived, err error) Result {
	if err != nil {
		return Result{name, Skip, "not checked: cannot read what arrived: " + err.Error()}
	}
	a := endpoint.ArrivedThrough(arrived, ep.Label)
	if says := ep.Contradictions(a); len(says) > 0 {
		return Result{name, Fail, strings.Join(says, "; ") + ": set its kind and connect in HOOKD_ENDPOINTS to what it receives"}
	}
	learned := ep.Learned(a)
	what := string(learned.Kind)
	if learned.Connect {
		what += ", Connect"
	}
	if ep.Undeclared && a == (endpoint.Arrived{}) {
		return Result{name, OK, fmt.Sprintf("HOOKD_ENDPOINTS does not declare it, and nothing arrived through it in the last %s "+
			"to learn its kind and connect from", humanize.Duration(endpoint.ArrivedWindow))}
	}
	if ep.Undeclared {
		return Result{name, OK, fmt.Sprintf("HOOKD_ENDPOINTS does not declare it: learned from what arrived in the last %s (%s)",
			humanize.Duration(endpoint.ArrivedWindow), what)}
	}
	return Result{name, OK, fmt.Sprintf("declared %s, and nothing that arrived in the last %s contradicts it",
		what, humanize.Duration(endpoint.ArrivedWindow))}
}

// kindLine checks Stripe sends what the label says: thin or snapshot
// events, and, for a destination, the connected accounts' or the account's
// own.
func kindLine(name string, s stripeSide, ep endpoint.Endpoint) Result {
	sends := endpoint.Snapshot
	if s.thin {
		sends = endpoint.Thin
	}
	if ep.Undeclared {
		return Result{name, OK, fmt.Sprintf("%s sends %s events; HOOKD_ENDPOINTS does not declare the endpoint, so hookd "+
			"learns its kind from what arrives", s.id, sends)}
	}
	if sends != ep.Kind {
		how := "a webhook endpoint (we_) sends snapshot events only: use the thin destination's ed_... as its stripe_id"
		if s.destination {
			how = fmt.Sprintf("set HOOKD_ENDPOINTS %s:kind=%s, or give it the destination that sends %s events", ep.Label, sends, ep.Kind)
		}
		return Result{name, Fail, fmt.Sprintf("%s sends %s events, but the label %s says kind=%s: %s", s.id, sends, ep.Label, ep.Kind, how)}
	}
	if !s.destination {
		return Result{name, OK, fmt.Sprintf("%s sends snapshot events, as the label says (Connect or not is not shown for a webhook endpoint)", s.id)}
	}
	if s.connect != ep.Connect {
		from := map[bool]string{true: "connected accounts' events", false: "the account's own events"}
		return Result{name, Warn, fmt.Sprintf("%s sends %s, but the label %s says connect=%t: set HOOKD_ENDPOINTS %s:connect=%t",
			s.id, from[s.connect], ep.Label, ep.Connect, ep.Label, s.connect)}
	}
	return Result{name, OK, fmt.Sprintf("%s sends %s events%s, as the label says", s.id, sends,
		map[bool]string{true: " of connected accounts", false: ""}[s.connect])}
}
