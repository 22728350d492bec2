package worker

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookd/hookd/internal/forwardsig"
	"github.com/hookd/hookd/internal/tracing"
	"golang.org/x/net/http/httpguts"
)

// MaxForwardTimeout bounds HOOKD_FORWARD_TIMEOUT. A retry claim holds the
// leases of its events for ⌈batch ÷ concurrency⌉ processor timeouts, which
// is how long the events of a replica that died mid-batch wait before
// another takes them: with the defaults and a 2-minute timeout that is
// over half an hour already. And the first attempt runs while Stripe waits
// for hookd's answer, which Stripe stops doing long before.
const MaxForwardTimeout = 2 * time.Minute

// Forwarder is the default Processor: it POSTs each event's exact payload to
// the user's app. A 2xx answer is success; anything else, or no answer, is a
// failure whose text says what the downstream answered. A failure that says
// the app is down (see appDownError) is one.
type Forwarder struct {
	url  string
	name string // the destination's, for HeaderDestination; "": not sent
	// keys are the decoded signing secrets, the newest first; none:
	// unsigned.
	keys [][]byte
	// headers are the destination's own, set on every call.
	headers http.Header
	client  *http.Client
	// transport is the client's own, under any tracing wrapper (Traced).
	transport *http.Transport
	now       func() time.Time
}

// DefaultForwardIdleTimeout is how long a kept connection to the app may
// sit idle before the forwarder closes it: under the shortest keep-alive
// of the common app servers, so that hookd, not the app, closes an idle
// connection, and no call goes out on one the app is closing (which would
// get no answer, and fail its attempt).
//
//	gunicorn (keepalive)              2 s
//	Node.js http (keepAliveTimeout)   5 s
//	uvicorn (timeout_keep_alive)      5 s
//	Apache httpd (KeepAliveTimeout)   5 s
//	Puma (persistent_timeout)        20 s
//	nginx (keepalive_timeout)        75 s
//
// Under load a connection is reused long before it idles that long.
const DefaultForwardIdleTimeout = time.Second

// defaultForwardConns is how many idle connections to the app a Forwarder
// keeps for reuse until KeepConns says how many calls can run at once.
const defaultForwardConns = 64

// HeaderDestination names, on every call of a destination's Forwarder, the
// destination it is made for.
const HeaderDestination = "Hookd-Destination"

// ForwardOptions are what a destination's Forwarder is made of.
type ForwardOptions struct {
	// Name is the destination's: every call carries it as
	// HeaderDestination. "": the header is not sent.
	Name string
	// URL is where each event is POSTed.
	URL string
	// Secrets are the Standard Webhooks secrets (whsec_<base64>) each call
	// is signed under, the newest first: while a secret is rotated, the
	// new one and the previous one both sign (forwardsig.SignAll). None:
	// calls go unsigned.
	Secrets []string
	// Headers are set on every call, such as an Authorization the app
	// asks for. User-Agent may be replaced; a header hookd sets itself
	// (Content-Type, webhook-*, Hookd-*, traceparent, tracestate) or one
	// net/http writes from the request (Host, Content-Length,
	// Transfer-Encoding, Trailer, Connection) is refused.
	Headers http.Header
}

// NewForwarder returns a Forwarder posting to target. When secret is set
// (whsec_<base64>, the Standard Webhooks format), each request carries the
// Standard Webhooks signature headers so the app can verify it came from
// hookd. The time limit is the caller's context.
func NewForwarder(target, secret string) (*Forwarder, error) {
	o := ForwardOptions{URL: target}
	if secret != "" {
		o.Secrets = []string{secret}
	}
	return NewDestinationForwarder(o)
}

// NewDestinationForwarder returns the Forwarder of one destination, as
// o says. The time limit of each call is the caller's context (Process
// with the destination's timeout).
func NewDestinationForwarder(o ForwardOptions) (*Forwarder, error) {
	if !httpguts.ValidHeaderFieldValue(o.Name) {
		return nil, fmt.Errorf("destination name %q cannot be sent as %s", o.Name, HeaderDestination)
	}
	keys, err := parseSecrets(o.Secrets)
	if err != nil {
		return nil, err
	}
	headers, err := extraHeaders(o.Headers)
	if err != nil {
		return nil, err
	}
	transport := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		// Retries and inline deliveries run many at once against one host;
		// the default of 2 idle connections per host would open and close
		// a connection for most of them.
		MaxIdleConnsPerHost: defaultForwardConns,
		IdleConnTimeout:     DefaultForwardIdleTimeout,
		TLSHandshakeTimeout: 10 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	return &Forwarder{
		url:       o.URL,
		name:      o.Name,
		keys:      keys,
		headers:   headers,
		transport: transport,
		client: &http.Client{
			Transport: transport,
			// A redirect is never followed: the client would turn the POST
			// into a body-less GET (301, 302, 303), and a 2xx to that would
			// mark processed an event the app never saw. The 3xx comes back
			// as the answer, a failure that names where the app points.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		now: time.Now,
	}, nil
}

// parseSecrets decodes each of secrets, in order. With one secret, its
// error is ParseSecret's alone (HOOKD_FORWARD_SECRET's callers name the
// setting); with several, it says which.
func parseSecrets(secrets []string) ([][]byte, error) {
	var keys [][]byte
	for i, secret := range secrets {
		key, err := forwardsig.ParseSecret(secret)
		if err == nil && key == nil {
			err = errors.New("empty: a secret looks like whsec_<base64>")
		}
		if err != nil && len(secrets) > 1 {
			err = fmt.Errorf("secret %d of %d: %w", i+1, len(secrets), err)
		}
		if err != nil {
			return nil, err
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// extraHeaders is a copy of h under canonical names, once each is checked:
// a valid name and values, and not a reserved one.
func extraHeaders(h http.Header) (http.Header, error) {
	out := make(http.Header, len(h))
	// In order, so that of several bad headers the same one is named.
	for _, name := range slices.Sorted(maps.Keys(h)) {
		values := h[name]
		if !httpguts.ValidHeaderFieldName(name) {
			return nil, fmt.Errorf("header %q: not a valid header name", name)
		}
		key := http.CanonicalHeaderKey(name)
		if why := reservedHeader(key); why != "" {
			return nil, fmt.Errorf("header %s: %s, it cannot be set per destination", key, why)
		}
		if len(values) == 0 {
			return nil, fmt.Errorf("header %s: no value", key)
		}
		for _, v := range values {
			if !httpguts.ValidHeaderFieldValue(v) {
				return nil, fmt.Errorf("header %s: its value holds a line break or a control character", key)
			}
		}
		out[key] = append(out[key], values...)
	}
	return out, nil
}

// reservedHeader says why the header key (canonical) is hookd's or
// net/http's own, or "" when a destination may set it.
func reservedHeader(key string) string {
	switch {
	case key == "Content-Type":
		return "hookd sends the event's JSON as it is"
	case strings.HasPrefix(key, "Webhook-"):
		return "the Standard Webhooks signature headers are hookd's"
	case strings.HasPrefix(key, "Hookd-"):
		return "the Hookd-* headers are hookd's own"
	case key == "Traceparent" || key == "Tracestate":
		return "the trace context is the delivery's own"
	case key == "Host" || key == "Content-Length" || key == "Transfer-Encoding" ||
		key == "Trailer" || key == "Connection":
		return "net/http writes it from the request"
	}
	return ""
}

// KeepConns keeps up to n idle connections to the app for reuse (never
// fewer than the 64 a Forwarder keeps by default): as many as hookd's
// paths can have calls to it at once (the retry loop's, the inline
// deliveries', the replays'), so that no call closes its connection when
// it ends and the next one opens another. Call it before the first
// Process.
func (f *Forwarder) KeepConns(n int) {
	f.transport.MaxIdleConnsPerHost = max(n, defaultForwardConns)
}

// CloseIdleAfter closes a kept connection once it has been idle for d
// (HOOKD_FORWARD_IDLE_TIMEOUT; DefaultForwardIdleTimeout when d is zero):
// set it under the app server's own keep-alive. Call it before the first
// Process.
func (f *Forwarder) CloseIdleAfter(d time.Duration) {
	f.transport.IdleConnTimeout = cmp.Or(d, DefaultForwardIdleTimeout)
}

// Traced makes each call to the app a client span of the attempt's trace
// that hands the app its W3C traceparent (tracing.Tracer.Transport); with
// t nil (tracing off) it changes nothing.
func (f *Forwarder) Traced(t *tracing.Tracer) {
	f.client.Transport = t.Transport(f.client.Transport)
}

// Process forwards d.
func (f *Forwarder) Process(ctx context.Context, d Delivery) Result {
	req, err := f.request(ctx, d)
	if err != nil {
		return Result{Err: fmt.Errorf("build forward request: %w", err)}
	}
	resp, err := f.client.Do(req)
	if err != nil {
		err = fmt.Errorf("no answer from downstream: %w", WithoutURL(err))
		if downCause(err) {
			err = &appDownError{Err: err}
		}
		return Result{Err: err}
	}
	defer resp.Body.Close()
	// Drain a little of what is left, so the connection can be reused.
	defer func() { _, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) }()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return Result{HTTPStatus: resp.StatusCode}
	}
	msg := fmt.Sprintf("downstream answered %d", resp.StatusCode)
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		// The body of a redirect is boilerplate; where it points is what
		// the operator needs to correct HOOKD_FORWARD_URL (or the
		// destination's URL).
		return Result{HTTPStatus: resp.StatusCode, Err: fmt.Errorf(
			"downstream answered %d redirecting to %s: hookd does not follow redirects, set %s to the final URL",
			resp.StatusCode, errorLocation(req.URL, resp.Header.Get("Location")), f.urlSetting())}
	}
	if body := errorBody(resp.Header.Get("Content-Type"), resp.Body); body != "" {
		msg += ": " + body
	}
	err = errors.New(msg)
	if downStatus(resp.StatusCode) {
		err = &appDownError{Err: err}
	}
	return Result{HTTPStatus: resp.StatusCode, Err: err}
}

// urlSetting names, for an operator, where the URL f posts to is set.
func (f *Forwarder) urlSetting() string {
	if f.name == "" {
		return "HOOKD_FORWARD_URL"
	}
	return "the url of destination " + f.name
}

// request is the POST of d's exact payload to the app, with hookd's
// headers, the destination's, and, with a secret, its Standard Webhooks
// signature (one per secret).
func (f *Forwarder) request(ctx context.Context, d Delivery) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url, bytes.NewReader(d.Payload))
	if err != nil {
		return nil, err
	}
	// The call is not marked idempotent: net/http then sends it again on a
	// new connection only when it knows nothing of it was written. A call
	// whose connection drops after it was written may still be in the app,
	// and one attempt must be one call. The race that marking it would
	// cover, an app closing an idle kept connection as a call goes out on
	// it, the idle timeout prevents (DefaultForwardIdleTimeout).
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "hookd")
	// None of the destination's headers is one hookd sets below
	// (extraHeaders), so only User-Agent can be replaced.
	for name, values := range f.headers {
		req.Header[name] = slices.Clone(values)
	}
	if f.name != "" {
		req.Header.Set(HeaderDestination, f.name)
	}
	req.Header.Set("Hookd-Event-Id", d.EventID)
	req.Header.Set("Hookd-Event-Type", d.EventType)
	req.Header.Set("Hookd-Attempt", strconv.Itoa(d.Attempt))
	if d.Endpoint != "" {
		req.Header.Set("Hookd-Endpoint", d.Endpoint)
	}
	if d.Livemode != nil {
		req.Header.Set("Hookd-Livemode", strconv.FormatBool(*d.Livemode))
	}
	if d.Account != "" {
		req.Header.Set("Hookd-Stripe-Account", d.Account)
	}
	if d.Replay != "" {
		// The app may tell a replay from Stripe's delivery, and which one.
		req.Header.Set("Hookd-Replay", d.Replay)
	}
	forwardsig.SignAll(req.Header, f.keys, d.EventID, f.now(), d.Payload)
	return req, nil
}

// errorLocation is a redirect's Location header, relative to the request's
// URL base, as last_error keeps it: the URL as DisplayURL shows it, since
// an app that redirects to a sign-in page or a signed URL puts tokens in
// its query, and bounded like every error text.
func errorLocation(base *url.URL, loc string) string {
	if loc == "" {
		return "(no Location header)"
	}
	u, err := base.Parse(loc)
	if err != nil {
		return "(an unparseable URL)"
	}
	return cutText(DisplayURL(u.String()), errorBodyLen)
}

// WithoutURL is err without the *url.Error net/http wraps a request's
// failure in: that repeats the whole URL, whose user, password or query may
// be a secret (a forward URL's token, an alert webhook's), into
// last_error, logs and pages; the cause inside names the host already.
func WithoutURL(err error) error {
	if uerr, ok := errors.AsType[*url.Error](err); ok {
		return uerr.Err
	}
	return err
}

// DisplayURL is raw as hookd shows it to people (doctor's output, logs,
// pages): its scheme, host and path, without the user, password, query or
// fragment, any of which may carry a secret.
func DisplayURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(an unparseable URL)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}
