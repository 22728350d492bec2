package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/hookd/hookd/internal/destinations"
	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/idp"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/internal/tracing"
	"github.com/hookd/hookd/views/humanize"
	"github.com/hookd/hookd/worker"
	"github.com/hookd/hookd/worker/maintenance"
	"github.com/hookd/hookd/worker/reconcile"
)

// metricsOff is HOOKD_METRICS_ADDR's value for no metrics listener.
const metricsOff = "off"

func parseMetricsAddr(dst *string, v string) error {
	if v == metricsOff {
		*dst = ""
		return nil
	}
	if _, _, err := net.SplitHostPort(v); err != nil {
		return errors.New("not a listen address like 127.0.0.1:9090, or off")
	}
	*dst = v
	return nil
}

// parseAddr reads a listen address; "" is none.
func parseAddr(dst *string, v string) error {
	if v != "" {
		if _, _, err := net.SplitHostPort(v); err != nil {
			return errors.New("not a listen address like 127.0.0.1:8081")
		}
	}
	*dst = v
	return nil
}

func parsePositiveDuration(dst *time.Duration, v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return errors.New("not a duration like 10s, 5m or 720h")
	}
	if d <= 0 {
		return errors.New("must be greater than zero")
	}
	*dst = d
	return nil
}

func parseMarkerRetention(dst *time.Duration, v string) error {
	if err := parsePositiveDuration(dst, v); err != nil {
		return err
	}
	if *dst < maintenance.MinMarkerRetention {
		return fmt.Errorf("must be at least %s: Stripe redelivers an event for up to %s, "+
			"and a redelivery whose marker was pruned is processed again",
			humanize.Typed(maintenance.MinMarkerRetention), humanize.Duration(stripeevent.RedeliveryWindow))
	}
	return nil
}

func parseDashboardConns(dst *int64, v string) error {
	if err := parsePositiveInt(dst, v); err != nil {
		return err
	}
	if *dst > 100 {
		return errors.New("at most 100, PostgreSQL's default max_connections; a few are enough, as each page runs its queries one after another")
	}
	return nil
}

// parseDashboardTimeout reads a statement timeout, which PostgreSQL counts
// in whole milliseconds and where 0 would mean no limit at all.
func parseDashboardTimeout(dst *time.Duration, v string) error {
	if err := parsePositiveDuration(dst, v); err != nil {
		return err
	}
	if *dst < time.Millisecond {
		return errors.New("at least 1ms: PostgreSQL counts the limit in milliseconds")
	}
	return nil
}

func parsePositiveInt(dst *int64, v string) error {
	var n int64
	if _, err := fmt.Sscan(v, &n); err != nil || fmt.Sprint(n) != v {
		return errors.New("not a whole number")
	}
	if n <= 0 {
		return errors.New("must be greater than zero")
	}
	*dst = n
	return nil
}

func parseBool(dst *bool, v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return errors.New("not true or false")
	}
	*dst = b
	return nil
}

// The processors HOOKD_PROCESSOR chooses from.
const (
	ProcessorForward = "forward"
	ProcessorDiscard = "discard"
)

func checkProcessor(v string) error {
	if v != ProcessorForward && v != ProcessorDiscard {
		return errors.New("must be forward or discard")
	}
	return nil
}

// parseCIDRs reads comma-separated CIDRs; a bare address stands for
// itself alone.
func parseCIDRs(dst *[]*net.IPNet, v string) error {
	*dst = nil
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if ip := net.ParseIP(part); ip != nil {
			bits := 8 * len(ip.To16())
			if ip.To4() != nil {
				ip, bits = ip.To4(), 32
			}
			*dst = append(*dst, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
			continue
		}
		_, n, err := net.ParseCIDR(part)
		if err != nil {
			return fmt.Errorf("%q is not a CIDR like 10.0.0.0/8 or an address", part)
		}
		*dst = append(*dst, n)
	}
	return nil
}

// checkTraceURL checks HOOKD_TRACE_URL: an absolute http(s) URL with a
// {trace_id} to put the id in.
func checkTraceURL(v string) error {
	if v == "" {
		return nil
	}
	if !strings.Contains(v, "{trace_id}") {
		return errors.New("must hold {trace_id}, where the trace's id goes")
	}
	return checkURL(strings.ReplaceAll(v, "{trace_id}", "0"))
}

// readTraceExport completes the trace export from the standard variables
// that decide whether there is one and how it is sent: the SDK reads the
// rest itself. OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turn it
// off, as the specification says; hookd sends OTLP over HTTP only, so
// another protocol stops it rather than sending nowhere.
func readTraceExport(e *tracing.Export, getenv func(string) string) error {
	e.TracesEndpoint = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if err := checkURL(e.TracesEndpoint); err != nil {
		return fmt.Errorf("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: %v (got %q)", err, e.TracesEndpoint)
	}
	if !e.On() {
		return nil
	}
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		*e = tracing.Export{}
		return nil
	}
	switch v := getenv("OTEL_TRACES_EXPORTER"); v {
	case "", "otlp":
	case "none":
		*e = tracing.Export{}
		return nil
	default:
		return fmt.Errorf("OTEL_TRACES_EXPORTER: hookd exports traces with otlp, or none (got %q)", v)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := getenv(name); v != "" && v != "http/protobuf" {
			return fmt.Errorf("%s: hookd sends OTLP over HTTP, http/protobuf, only (got %q)", name, v)
		}
	}
	e.Sampler = getenv("OTEL_TRACES_SAMPLER")
	return nil
}

func checkURL(v string) error {
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("not an absolute http(s) URL")
	}
	return nil
}

func parseDestinationsKey(dst *SecretBytes, v string) error {
	if v == "" {
		*dst = nil
		return nil
	}
	key, err := destinations.ParseKey(v)
	*dst = key
	return err
}

func parseRetryBatch(dst *int64, v string) error {
	if err := parsePositiveInt(dst, v); err != nil {
		return err
	}
	if *dst > worker.MaxRetryBatch {
		return fmt.Errorf("at most %d: each event of a batch holds a slot of PostgreSQL's shared lock table", worker.MaxRetryBatch)
	}
	return nil
}

func parseSecrets(dst *[]Secret, v string) error {
	*dst = nil
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.HasPrefix(part, "whsec_") {
			return errors.New("each secret must start with whsec_ (Stripe's signing secret, from the webhook endpoint's page)")
		}
		*dst = append(*dst, Secret(part))
	}
	return nil
}

func parseEndpointSecrets(dst *[]endpoint.Endpoint, v string) error {
	eps, err := endpoint.ParseSecrets(v)
	if err != nil {
		return err
	}
	*dst = eps
	return nil
}

func parseTestEvents(dst *endpoint.TestEvents, v string) error {
	t, err := endpoint.ParseTestEvents(v)
	if err != nil {
		return errors.New("forward, discard or queue-only")
	}
	*dst = t
	return nil
}

func parseSnapshotAlias(dst *receiver.SnapshotAlias, v string) error {
	a, err := receiver.ParseSnapshotAlias(v)
	if err != nil {
		return err
	}
	*dst = a
	return nil
}

func checkAPIKey(v string) error {
	if v == "" {
		return nil
	}
	for _, prefix := range []string{"rk_live_", "rk_test_", "sk_live_", "sk_test_"} {
		if strings.HasPrefix(v, prefix) {
			return nil
		}
	}
	return errors.New("must be a restricted key rk_... (or a secret key sk_...) from Stripe's dashboard, Developers → API keys")
}

func checkEndpointID(v string) error {
	if v != "" && !strings.HasPrefix(v, "we_") {
		return errors.New("must be a webhook endpoint id we_..., shown on the endpoint's page in Stripe's dashboard")
	}
	return nil
}

// parseAccounts reads comma-separated connected account ids.
func parseAccounts(dst *[]string, v string) error {
	*dst = nil
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.HasPrefix(part, "acct_") || strings.ContainsAny(part, " /?#") {
			return fmt.Errorf("%q is not a connected account id (acct_...)", part)
		}
		*dst = append(*dst, part)
	}
	return nil
}

// rateUnlimited is HOOKD_FORWARD_RATE's value for no bound.
const rateUnlimited = "unlimited"

func parseForwardRate(dst *float64, v string) error {
	if v == rateUnlimited {
		*dst = 0
		return nil
	}
	return parseRate(dst, v, 1e6, "deliveries a second greater than zero, like 50 or 0.5, or "+rateUnlimited)
}

func parseBreakerProbe(dst *time.Duration, v string) error {
	if err := parsePositiveDuration(dst, v); err != nil {
		return err
	}
	if *dst > worker.MaxProbeWait {
		return fmt.Errorf("at most %s, the longest the probes come apart", humanize.Typed(worker.MaxProbeWait))
	}
	return nil
}

// parseAPIRate reads Stripe's API budget, which may be below one a
// second.
func parseAPIRate(dst *float64, v string) error {
	if err := parseRate(dst, v, math.Inf(1), "reads per second greater than zero, like 20 or 0.5"); err != nil {
		return err
	}
	if *dst > 100 {
		return errors.New("at most 100: Stripe's own limit in live mode, which the app shares")
	}
	return nil
}

// parseRate reads a rate a second, which may be below one: a finite
// number above zero and at most max. NaN fails every comparison, so it is
// refused by name, not by a bound.
func parseRate(dst *float64, v string, max float64, what string) error {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 || f > max {
		return errors.New("not a number of " + what)
	}
	*dst = f
	return nil
}

// parseInterval reads a schedule's interval, where 0 turns it off.
func parseInterval(dst *time.Duration, v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return errors.New("not a duration like 30m or 1h (0 turns it off)")
	}
	if d < 0 {
		return errors.New("must not be negative (0 turns it off)")
	}
	*dst = d
	return nil
}

func ParseReconcileWindow(dst *time.Duration, v string) error {
	if err := parsePositiveDuration(dst, v); err != nil {
		return err
	}
	if *dst > reconcile.MaxWindow {
		return fmt.Errorf("at most %s: Stripe keeps events for 30 days", humanize.Typed(reconcile.MaxWindow))
	}
	return nil
}

// HOOKD_PASSWORD_SIGNIN's values.
const (
	passwordSignInOn  = "on"
	passwordSignInOff = "off"
)

func parsePasswordSignIn(off *bool, v string) error {
	switch v {
	case passwordSignInOn, passwordSignInOff:
		*off = v == passwordSignInOff
		return nil
	}
	return errors.New("on or off")
}

func parseOIDCRoles(dst *idp.Roles, v string) error {
	roles, err := idp.ParseRoles(v)
	if err != nil {
		return err
	}
	*dst = roles
	return nil
}

// checkClaim refuses what cannot be a claim's name.
func checkClaim(v string) error {
	if v == "" || strings.ContainsFunc(v, unicode.IsSpace) {
		return errors.New("not a claim name, like groups or roles")
	}
	return nil
}

func checkEmergencyAdmin(v string) error {
	if local, domain, ok := strings.Cut(v, "@"); v != "" && (!ok || local == "" || domain == "") {
		return errors.New("not an email address: the email of a password account")
	}
	return nil
}
