package maintenance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/store/alerts"
	"github.com/hookd/hookd/internal/store/ungenerated"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views/humanize"
)

// defaultWatchInterval is how often Stripe's API is asked about each
// endpoint, across replicas: a disabled endpoint is noticed within it, at
// one read per endpoint, a sliver of the API budget.
const defaultWatchInterval = 5 * time.Minute

// firstNotices is how many event-generation failures an alert names.
const firstNotices = 3

// endpointConditions are the conditions of the labelled endpoints: quiet
// for those with a quiet period, disabled and API version for those hookd
// can read from Stripe, declaration for those HOOKD_ENDPOINTS declares.
func (a *Alerter) endpointConditions() []alerts.Condition {
	var cs []alerts.Condition
	for _, ep := range a.cfg.Endpoints {
		if !ep.Undeclared {
			cs = append(cs, alerts.EndpointCondition(alerts.Declaration, ep.Label))
		}
		if a.quiet(ep) > 0 {
			cs = append(cs, alerts.EndpointCondition(alerts.Quiet, ep.Label))
		}
		if a.watched(ep) {
			cs = append(cs, alerts.EndpointCondition(alerts.StripeDisabled, ep.Label),
				alerts.EndpointCondition(alerts.StripeVersion, ep.Label))
		}
	}
	return cs
}

func (a *Alerter) watched(ep endpoint.Endpoint) bool { return a.cfg.Stripe != nil && ep.StripeID != "" }

// quiet is ep's quiet period: its own, or HOOKD_ALERT_QUIET's.
func (a *Alerter) quiet(ep endpoint.Endpoint) time.Duration {
	if ep.Quiet > 0 {
		return ep.Quiet
	}
	return a.cfg.Quiet
}

// watch reads from Stripe the endpoints no replica read within
// WatchInterval and records what it said. A read that fails is logged and
// recorded; what was read before stands, so a passing outage of Stripe's
// API neither starts nor clears a condition.
func (a *Alerter) watch(ctx context.Context) {
	ws := alerts.NewWatchStore(a.store.DB())
	for _, ep := range a.cfg.Endpoints {
		if !a.watched(ep) || ctx.Err() != nil {
			continue
		}
		if err := a.watchOne(ctx, ws, ep); err != nil && ctx.Err() == nil {
			a.logger.WarnContext(ctx, "cannot read the endpoint from Stripe", "endpoint", ep.Label, "stripe_id", ep.StripeID, "err", err)
		}
	}
}

func (a *Alerter) watchOne(ctx context.Context, ws *alerts.WatchStore, ep endpoint.Endpoint) error {
	claimed, err := ws.Claim(ctx, ep.Label, ep.StripeID, a.cfg.WatchInterval)
	if err != nil || !claimed {
		return err
	}
	status, version, err := readStripe(ctx, a.cfg.Stripe, ep)
	if err != nil {
		if ferr := ws.Failed(ctx, ep.Label, err.Error()); ferr != nil {
			return ferr
		}
		return err
	}
	prev, _, err := ws.Get(ctx, ep.Label)
	if err != nil {
		return err
	}
	expected, err := a.expectedVersion(ctx, ep, prev, version)
	if err != nil {
		return err
	}
	return ws.Read(ctx, ep.Label, status, version, expected)
}

// readStripe reads ep's status and API version from Stripe: "" for the
// version of an endpoint that follows the account's default, or of a
// destination of thin events, which have none.
func readStripe(ctx context.Context, c *stripeapi.Client, ep endpoint.Endpoint) (status, version string, err error) {
	if ep.Destination() {
		d, err := c.Destination(ctx, ep.StripeID)
		if errors.Is(err, stripeapi.ErrNotFound) {
			return alerts.StatusMissing, "", nil
		}
		if err != nil {
			return "", "", err
		}
		if d.Thin {
			return d.Status, "", nil
		}
		return d.Status, d.APIVersion, nil
	}
	e, err := c.Endpoint(ctx, ep.StripeID)
	if errors.Is(err, stripeapi.ErrNotFound) {
		return alerts.StatusMissing, "", nil
	}
	if err != nil {
		return "", "", err
	}
	return e.Status, e.APIVersion, nil
}

// recentWindow is how far back the events received through an endpoint
// count as recent, at the first read of its version.
const recentWindow = 24 * time.Hour

// expectedVersion is the API version the app is known to get through ep,
// now that Stripe says ep's is version. At the first read, it is the
// version of the recent events received through it, or ep's own. Once an
// event came through after ep's version was first read, that version is
// what the app gets: Stripe renders an endpoint's events in its version.
// Until then, it is what it was.
func (a *Alerter) expectedVersion(ctx context.Context, ep endpoint.Endpoint, prev alerts.Watch, version string) (string, error) {
	if prev.ReadAt == nil {
		recent, ok, err := a.store.RecentAPIVersion(ctx, ep.Label, time.Now().Add(-recentWindow))
		if err != nil || !ok {
			return version, err
		}
		return recent, nil
	}
	if version != prev.APIVersion || prev.APIVersionSince == nil {
		return prev.ExpectedAPIVersion, nil
	}
	since := *prev.APIVersionSince
	if recent, ok, err := a.store.RecentAPIVersion(ctx, ep.Label, since); err != nil || ok {
		return recent, err
	}
	last, ok, err := a.store.LastEventAt(ctx, ep.Label)
	if err != nil {
		return "", err
	}
	if ok && last.After(since) {
		return version, nil
	}
	return prev.ExpectedAPIVersion, nil
}

// evaluateEndpoint evaluates one of a labelled endpoint's conditions. An
// endpoint no longer configured, or no longer watched, holds none: an
// active condition of it clears.
func (a *Alerter) evaluateEndpoint(ctx context.Context, tx *queue.Tx, st alerts.State, kind, label string, now time.Time) (alerts.State, string, error) {
	ep, err := endpoint.Find(a.cfg.Endpoints, label)
	switch {
	case err != nil:
	case kind == alerts.Declaration:
		return a.evaluateDeclaration(ctx, tx, st, ep, label, now)
	case kind == alerts.Quiet:
		if a.quiet(ep) > 0 {
			return a.evaluateQuiet(ctx, tx, st, ep, label, now)
		}
	case a.watched(ep):
		return a.evaluateAtStripe(ctx, tx, st, kind, ep, label, now)
	}
	return transition(st, false, now, nil, func() string {
		return fmt.Sprintf("hookd: cleared: endpoint %s is no longer watched (%s). %s", escape(label), kind, a.link("/"))
	})
}

// evaluateDeclaration evaluates whether what arrives through ep
// contradicts what HOOKD_ENDPOINTS declares of it; an endpoint it no
// longer declares holds no such condition.
func (a *Alerter) evaluateDeclaration(ctx context.Context, tx *queue.Tx, st alerts.State, ep endpoint.Endpoint, label string, now time.Time) (alerts.State, string, error) {
	if ep.Undeclared {
		return transition(st, false, now, nil, func() string {
			return fmt.Sprintf("hookd: cleared: HOOKD_ENDPOINTS no longer declares endpoint %s: its kind and connect are "+
				"learned from what arrives. %s", escape(label), a.link("/"))
		})
	}
	arrived, err := tx.EndpointsArrived(ctx, endpoint.ArrivedWindow)
	if err != nil {
		return st, "", err
	}
	says := ep.Contradictions(endpoint.ArrivedThrough(arrived, label))
	return transition(st, len(says) > 0, now, func() string {
		return fmt.Sprintf("hookd: %s. Every such event is still accepted and processed; set the endpoint's kind and "+
			"connect in HOOKD_ENDPOINTS to what it receives (hookd doctor checks it). %s",
			escape(strings.Join(says, "; ")), a.link("/events?endpoint="+label))
	}, func() string {
		return fmt.Sprintf("hookd: cleared: what arrives through endpoint %s is what HOOKD_ENDPOINTS declares. %s",
			escape(label), a.link("/events?endpoint="+label))
	})
}

// evaluateQuiet evaluates whether no event came through ep for longer
// than its quiet period, counted from when the condition was first
// checked when none ever came.
func (a *Alerter) evaluateQuiet(ctx context.Context, tx *queue.Tx, st alerts.State, ep endpoint.Endpoint, label string, now time.Time) (alerts.State, string, error) {
	quiet := a.quiet(ep)
	last, seen, err := tx.LastEventAt(ctx, label)
	if err != nil {
		return st, "", err
	}
	from := st.CreatedAt
	if seen {
		from = last
	}
	return transition(st, now.Sub(from) > quiet, now, func() string {
		lastly := "none has ever come through it"
		if seen {
			lastly = "the last came at " + last.UTC().Format("2006-01-02 15:04 UTC")
		}
		return fmt.Sprintf("hookd: no event has come through endpoint %s for %s, its quiet period (%s): is Stripe still sending? "+
			"hookd doctor checks the endpoint at Stripe. %s", escape(label), humanize.Duration(quiet), lastly, a.link("/"))
	}, func() string {
		return fmt.Sprintf("hookd: cleared: events come through endpoint %s again. %s", escape(label), a.link("/"))
	})
}

// evaluateAtStripe evaluates a condition of what Stripe said of ep when
// it was last read (watch): disabled, or an API version other than the
// one the app gets. Before the first read nothing is known, and an active
// condition stands.
func (a *Alerter) evaluateAtStripe(ctx context.Context, tx *queue.Tx, st alerts.State, kind string, ep endpoint.Endpoint, label string, now time.Time) (alerts.State, string, error) {
	w, ok, err := alerts.NewWatchStore(tx.PgxTx()).Get(ctx, label)
	if err != nil {
		return st, "", err
	}
	if !ok || w.ReadAt == nil || w.StripeID != ep.StripeID || w.Status == nil {
		return st, "", nil
	}
	name := fmt.Sprintf("%s (%s)", escape(label), escape(ep.StripeID))
	switch kind {
	case alerts.StripeDisabled:
		status := *w.Status
		return transition(st, status != alerts.StatusEnabled, now, func() string {
			if status == alerts.StatusMissing {
				return fmt.Sprintf("hookd: Stripe has no endpoint %s any more (404): nothing arrives through it. Create it again "+
					"and set its id in HOOKD_ENDPOINTS (stripe_id) or STRIPE_WEBHOOK_ENDPOINT_ID. %s", name, a.link("/"))
			}
			return fmt.Sprintf("hookd: Stripe has disabled endpoint %s: it sends it nothing (Stripe disables an endpoint that "+
				"keeps failing). Enable it on its page in Stripe's dashboard, then run hookd reconcile for what it missed. %s",
				name, a.link("/"))
		}, func() string {
			return fmt.Sprintf("hookd: cleared: endpoint %s is enabled at Stripe again; run hookd reconcile for the events it "+
				"missed meanwhile. %s", name, a.link("/"))
		})
	case alerts.StripeVersion:
		return transition(st, w.APIVersion != w.ExpectedAPIVersion, now, func() string {
			return fmt.Sprintf("hookd: the API version of endpoint %s is %s, but the app has been getting %s through it: "+
				"Stripe renders the endpoint's events in its version, so the objects the app reads change shape. Check the app "+
				"reads %s, or set the endpoint's version back in Stripe's dashboard. %s", name, version(w.APIVersion),
				version(w.ExpectedAPIVersion), version(w.APIVersion), a.link("/"))
		}, func() string {
			return fmt.Sprintf("hookd: cleared: the events of endpoint %s are in %s, its API version. %s", name,
				version(w.APIVersion), a.link("/"))
		})
	}
	return st, "", nil
}

// version names an API version in an alert.
func version(v string) string {
	if v == "" {
		return "the account's default version"
	}
	return escape(v)
}

// evaluateGenerationFailures takes the event-generation-failure notices
// that arrived since the last check. The first ones start the condition,
// named; the ones after are counted, until none arrived for NoticeQuiet,
// when it clears with the total.
func (a *Alerter) evaluateGenerationFailures(ctx context.Context, tx *queue.Tx, st alerts.State, now time.Time) (alerts.State, string, error) {
	notices, err := ungenerated.TakeUnannounced(ctx, tx.PgxTx())
	if err != nil {
		return st, "", err
	}
	link := a.link("/failures")
	n := int64(len(notices))
	switch {
	case n > 0 && !st.Active:
		named := make([]string, 0, firstNotices)
		for _, nt := range notices[:min(len(notices), firstNotices)] {
			about := escape(nt.EventID)
			if nt.LostType != "" {
				about += " (" + escape(nt.LostType)
				if nt.ObjectID != "" {
					about += " of " + escape(nt.ObjectID)
				}
				about += ")"
			}
			named = append(named, about)
		}
		more := ""
		if len(notices) > firstNotices {
			more = ", …"
		}
		return alerts.State{Condition: st.Condition, Active: true, Since: &now, LastSeen: &now, Count: n, CreatedAt: st.CreatedAt},
			fmt.Sprintf("hookd: Stripe could not generate %s: they reached no endpoint and no reconciliation can recover them. "+
				"Notices: %s%s. Look at the objects in Stripe (Workbench, Health) and do by hand what the events would have made the app do. %s",
				plural(n, "event", "events"), strings.Join(named, ", "), more, link), nil
	case n > 0:
		st.LastSeen = &now
		st.Count += n
		return st, "", nil
	case st.Active && st.LastSeen != nil && now.Sub(*st.LastSeen) >= a.cfg.NoticeQuiet:
		return alerts.State{Condition: st.Condition, CreatedAt: st.CreatedAt}, fmt.Sprintf(
			"hookd: cleared: no event-generation failure for %s; Stripe could not generate %s since %s. %s",
			humanize.Duration(a.cfg.NoticeQuiet), plural(st.Count, "event", "events"),
			st.Since.UTC().Format("2006-01-02 15:04 UTC"), link), nil
	}
	return st, "", nil
}
