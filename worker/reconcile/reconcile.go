// Package reconcile recovers the Stripe events hookd never received. It asks
// Stripe's API which events each endpoint should have been sent in a window,
// and runs each that has neither a dedup marker nor a queue row through the
// receiver's own pipeline, so it is handled as a delivery would have been,
// and never twice.
package reconcile

// Each kind of endpoint is listed where Stripe keeps its events: a
// snapshot endpoint's in /v1/events; a thin destination's in
// /v2/core/events, by created and type; a Connect endpoint's account by
// account (Stripe-Account, or Stripe-Context for thin events), for the
// accounts hookd saw events from in the window and the ones configured.
//
// Stripe retries a failed delivery for three days and then gives up; it
// disables an endpoint that keeps failing; a delivery refused by mistake (a
// wrong secret during a roll, an outage longer than the retries) is never
// sent again. Reconciliation closes those gaps for the 30 days Stripe keeps
// events.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/startstop"
	"github.com/hookd/hookd/internal/store/reconcileruns"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views/humanize"
)

const (
	// minAge is how old an event must be before a run considers it:
	// Stripe's first delivery of a younger one may still be on its way, or
	// in its first retries.
	minAge = 5 * time.Minute
	// MaxWindow is the longest window: Stripe keeps events for 30 days.
	MaxWindow = 720 * time.Hour
	// DefaultWindow covers Stripe's own retries.
	DefaultWindow = stripeevent.RedeliveryWindow
	// defaultConcurrency is how many recovered events are processed at
	// once: a few, oldest first, so an app that just came back from an
	// outage is not flooded.
	defaultConcurrency = 4
)

// ErrNotReceived means an event is of a type the endpoint does not
// receive, so hookd does not pull it. It is wrapped with the type.
var ErrNotReceived = errors.New("the endpoint does not receive this event type")

// Config configures a Reconciler. Zero fields get the defaults above.
type Config struct {
	// Client reads Stripe's API.
	Client *stripeapi.Client
	// Endpoints are the labelled endpoints hookd serves; those with a
	// StripeID (we_... or ed_...) are reconciled, each by its kind, and
	// Stripe's description of each (its enabled events) decides which
	// events it should have received.
	Endpoints []endpoint.Endpoint
	// Accounts are connected accounts (acct_...) whose events every
	// Connect endpoint's run lists, besides the accounts hookd saw events
	// from in the window: HOOKD_RECONCILE_ACCOUNTS.
	Accounts []string
	// Window is how far back the scheduled run looks. Default:
	// DefaultWindow, or MaxWindow when that is shorter.
	Window time.Duration
	// MaxWindow is the longest window a run may look back: hookd passes its
	// marker retention, since an event whose marker was pruned would look
	// never seen and be processed again. Default, and at most: MaxWindow.
	MaxWindow time.Duration
	// Interval is how often the scheduled run happens, across all replicas;
	// zero turns the schedule off (Run returns at once).
	Interval time.Duration
	// Concurrency is how many recovered events are processed at once.
	// Default: defaultConcurrency.
	Concurrency int
}

// Reconciler runs reconciliations, on demand or on a schedule.
type Reconciler struct {
	store    *queue.Store
	runs     *reconcileruns.Store
	receiver *receiver.Receiver
	logger   *slog.Logger
	cfg      Config
	schedule *startstop.Service
}

// New returns a Reconciler that recovers events through receiver.
func New(store *queue.Store, receiver *receiver.Receiver, logger *slog.Logger, cfg Config) *Reconciler {
	cfg.MaxWindow = min(cmp.Or(cfg.MaxWindow, MaxWindow), MaxWindow)
	cfg.Window = min(cmp.Or(cfg.Window, DefaultWindow), cfg.MaxWindow)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, defaultConcurrency)
	r := &Reconciler{store: store, runs: reconcileruns.New(store.DB()), receiver: receiver, logger: logger.With("component", "reconcile"), cfg: cfg}
	r.schedule = startstop.New(r.runSchedule)
	return r
}

// Window is the window scheduled runs use, and the default of the others.
func (r *Reconciler) Window() time.Duration { return r.cfg.Window }

// MaxWindow is the longest window a run accepts.
func (r *Reconciler) MaxWindow() time.Duration { return r.cfg.MaxWindow }

// ErrWindowTooLong is RunOnce's answer to a window beyond MaxWindow.
var ErrWindowTooLong = errors.New("window too long")

// Options says how to run one reconciliation.
type Options struct {
	// Window is how far back to look; zero means the configured window.
	// At most the Reconciler's MaxWindow.
	Window time.Duration
	// DryRun lists and classifies the events but changes nothing: no
	// event is processed and the run is not recorded.
	DryRun bool
	// Trigger says who asked, for the record of the run. Default:
	// reconcileruns.TriggerCommand.
	Trigger reconcileruns.Trigger
	// Since, when set, is the start of the window in place of Window (and
	// no earlier than MaxWindow ago): a failover's run looks back from the
	// newest event the new primary holds.
	Since time.Time
	// Young includes the events younger than the usual 5 minutes: after a
	// failover, Stripe's delivery of a young event may have been answered
	// 200 and lost with the old primary, and is not coming again.
	Young bool
}

// Result is what one run found and did.
type Result struct {
	reconcileruns.Counts
	// Since is the start of the window.
	Since  time.Time
	Window time.Duration
	DryRun bool
	// Pages is how many pages of events Stripe returned.
	Pages int
	// Endpoints are the endpoints reconciled, as Stripe described them.
	Endpoints []Surveyed
	// OtherVersion counts the events run through the pipeline (or, in a
	// dry run, that would be) whose API version differs from the one their
	// endpoint is pinned to: the app gets them in a shape its deliveries
	// do not have.
	OtherVersion int64
}

// Surveyed is one labelled endpoint as a run found it at Stripe.
type Surveyed struct {
	Label    string
	StripeID string
	Kind     endpoint.Kind
	Connect  bool
	// Status is "enabled" or "disabled": Stripe sends a disabled endpoint
	// nothing.
	Status string
	// APIVersion is the version its snapshot events are rendered in; empty
	// when it follows the account's default, or sends thin events.
	APIVersion string
	// URL is where Stripe sends its events.
	URL string
	// EnabledEvents are the types Stripe sends it.
	EnabledEvents []string
	// Accounts are the connected accounts whose events the run listed, for
	// a Connect endpoint.
	Accounts []string
}

// Disabled reports whether Stripe has disabled the endpoint.
func (s Surveyed) Disabled() bool { return s.Status == "disabled" }

// receives reports whether Stripe sends s events of eventType.
func (s Surveyed) receives(eventType string) bool {
	return slices.Contains(s.EnabledEvents, "*") || slices.Contains(s.EnabledEvents, eventType)
}

// Disabled returns the endpoints of the run Stripe has disabled.
func (r Result) Disabled() []Surveyed {
	var out []Surveyed
	for _, s := range r.Endpoints {
		if s.Disabled() {
			out = append(out, s)
		}
	}
	return out
}

// Summary is the run's one line of counts.
func (r Result) Summary() string {
	c := r.Counts
	if r.DryRun {
		return fmt.Sprintf("dry run over %s: examined %d, already processed %d, already queued %d, would recover %d, "+
			"skipped by type %d, skipped as too young %d",
			humanize.Typed(r.Window), c.Examined, c.AlreadyProcessed, c.AlreadyQueued, c.Recovered, c.SkippedType, c.SkippedYoung)
	}
	return fmt.Sprintf("reconciled %s: examined %d, already processed %d, already queued %d, recovered %d, queued %d, "+
		"in flight %d, skipped by type %d, skipped as too young %d",
		humanize.Typed(r.Window), c.Examined, c.AlreadyProcessed, c.AlreadyQueued, c.Recovered, c.Queued,
		c.InFlight, c.SkippedType, c.SkippedYoung)
}

// RunOnce reconciles the events Stripe created in the window. It first
// lists and classifies every event, so an error from Stripe's API (a bad
// key, a wrong endpoint id, a missing permission) changes nothing; then it
// runs the never-seen ones through the pipeline, oldest first. A run that
// is not a dry run takes the reconcile lock and returns
// reconcileruns.ErrRunning when another run holds it.
//
// The processing of each event runs to its end even when ctx is cancelled
// (it is bounded by the processor's timeout); no new event starts then.
func (r *Reconciler) RunOnce(ctx context.Context, opts Options) (Result, error) {
	opts.Trigger = cmp.Or(opts.Trigger, reconcileruns.TriggerCommand)
	res := Result{Window: cmp.Or(opts.Window, r.cfg.Window), DryRun: opts.DryRun}
	if res.Window > r.cfg.MaxWindow {
		return res, fmt.Errorf("%w: %s is longer than %s, the marker retention or the 30 days Stripe keeps events",
			ErrWindowTooLong, humanize.Typed(res.Window), humanize.Typed(r.cfg.MaxWindow))
	}
	var lock *reconcileruns.Lease
	if !opts.DryRun {
		var err error
		if lock, err = reconcileruns.TryLock(ctx, r.store); err != nil {
			return res, err
		}
		defer lock.Release(context.WithoutCancel(ctx))
		renew := r.renewWhileRunning(lock)
		renew.Start(context.WithoutCancel(ctx))
		defer renew.Stop()
		if opts.Trigger == reconcileruns.TriggerSchedule {
			// Checked under the lease, which a run holds until its record
			// commits: a replica that found a run due just before another
			// finished sees that run here and does not repeat it.
			if due, err := r.due(ctx); err != nil || !due {
				return res, cmp.Or(err, errNotDue)
			}
		}
	}
	now, err := r.store.Now(ctx)
	if err != nil {
		return res, err
	}
	res.Since = now.Add(-res.Window)
	if !opts.Since.IsZero() {
		res.Since = opts.Since
		if earliest := now.Add(-r.cfg.MaxWindow); res.Since.Before(earliest) {
			res.Since = earliest
		}
		res.Window = now.Sub(res.Since)
	}

	todo, err := r.survey(ctx, now, &res, opts.Young)
	if opts.DryRun {
		// What a run would recover: the events the survey found to do.
		res.Recovered = int64(len(todo))
		return res, err
	}
	if err == nil {
		err = r.recover(ctx, todo, &res)
	}
	// A run that stopped at Stripe's API before touching anything is not
	// recorded, so it changes nothing, unless nobody would see it fail
	// otherwise: the schedule's.
	if err != nil && opts.Trigger != reconcileruns.TriggerSchedule && res.Recovered+res.Queued == 0 {
		return res, err
	}
	if rerr := r.record(ctx, lock, opts.Trigger, now, res, err); rerr != nil && err == nil {
		return res, rerr
	}
	return res, err
}

// renewWhileRunning renews the run's lease every third of its length
// while it runs. A renewal that fails is logged: the run goes on, since a
// second run at once costs only Stripe API reads.
func (r *Reconciler) renewWhileRunning(lock *reconcileruns.Lease) *startstop.Service {
	return startstop.New(func(ctx context.Context) {
		startstop.Every(ctx, reconcileruns.LeaseFor/3, func(ctx context.Context) {
			if err := lock.Renew(ctx); err != nil && ctx.Err() == nil {
				r.logger.Warn("cannot renew the reconcile run's lease", "err", err)
			}
		})
	})
}

func (r *Reconciler) record(ctx context.Context, lock *reconcileruns.Lease, trigger reconcileruns.Trigger,
	started time.Time, res Result, runErr error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	errText := ""
	if runErr != nil {
		errText = runErr.Error()
	}
	return lock.Record(ctx, trigger, started, res.Since, res.Counts, errText)
}

// pending is an event to recover, with the label of the endpoint it
// should have come through.
type pending struct {
	ev    stripeapi.Event
	label string
}

// survey reads every endpoint with a Stripe id and lists the window's
// events of each, counting each event once into res however many
// endpoints list it, and returns the never-seen ones of types their
// endpoint receives that are old enough (any age when young), oldest
// first. Every endpoint is read before any event is listed, so a wrong id
// or a missing permission stops the run before it lists anything.
func (r *Reconciler) survey(ctx context.Context, now time.Time, res *Result, young bool) ([]pending, error) {
	if err := r.readEndpoints(ctx, res); err != nil {
		return nil, err
	}
	youngAfter := now.Add(-minAge)
	if young {
		// Nothing listed is too young: Stripe lists no event from the
		// future of the database's clock by more than the skew.
		youngAfter = now.Add(time.Hour)
	}
	l := &listing{r: r, res: res, youngAfter: youngAfter, examined: map[string]bool{}}
	for _, s := range res.Endpoints {
		if err := r.list(ctx, s, res.Since, func(page []stripeapi.Event) error { return l.page(ctx, s, page) }); err != nil {
			return nil, err
		}
	}
	// Stripe lists newest first, endpoint by endpoint and account by
	// account: the oldest go first over all of them.
	slices.SortStableFunc(l.todo, func(a, b pending) int { return a.ev.Created.Compare(b.ev.Created) })
	if res.OtherVersion > 0 {
		r.logger.WarnContext(ctx, "events to recover are rendered in another API version than their endpoint's",
			"events", res.OtherVersion)
	}
	return l.todo, nil
}

// readEndpoints reads at Stripe every endpoint with a Stripe id into
// res.Endpoints, with the accounts to list of each Connect one.
func (r *Reconciler) readEndpoints(ctx context.Context, res *Result) error {
	res.Endpoints = nil
	eps, err := r.endpoints(ctx)
	if err != nil {
		return err
	}
	for _, e := range eps {
		if e.StripeID == "" {
			continue
		}
		s, err := r.describe(ctx, e)
		if err != nil {
			return err
		}
		if s.Connect {
			if s.Accounts, err = r.accounts(ctx, e.Label, res.Since); err != nil {
				return err
			}
		}
		res.Endpoints = append(res.Endpoints, s)
	}
	return nil
}

// listing is a survey's way through the pages Stripe lists: what it
// counted and what it found to recover.
type listing struct {
	r          *Reconciler
	res        *Result
	youngAfter time.Time
	// examined holds the events counted already, listed by an endpoint
	// before this one.
	examined map[string]bool
	todo     []pending
}

// page counts the events of one page that s listed, and keeps those to
// recover: never seen, of a type s receives, and old enough.
func (l *listing) page(ctx context.Context, s Surveyed, page []stripeapi.Event) error {
	res := l.res
	res.Pages++
	var ids []string
	var eligible []stripeapi.Event
	for _, ev := range page {
		if l.examined[ev.ID] {
			continue
		}
		l.examined[ev.ID] = true
		res.Examined++
		switch {
		case !s.receives(ev.Type):
			res.SkippedType++
		case ev.Created.After(l.youngAfter):
			res.SkippedYoung++
		default:
			ids = append(ids, ev.ID)
			eligible = append(eligible, ev)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	processed, queued, err := l.r.store.SeenEvents(ctx, queue.SourceStripe, ids)
	if err != nil {
		return err
	}
	for _, ev := range eligible {
		switch {
		case processed[ev.ID]:
			res.AlreadyProcessed++
		case queued[ev.ID]:
			res.AlreadyQueued++
		default:
			l.todo = append(l.todo, pending{ev: ev, label: s.Label})
			if s.APIVersion != "" && ev.APIVersion != "" && ev.APIVersion != s.APIVersion {
				res.OtherVersion++
			}
		}
	}
	return nil
}

// describe reads endpoint e at Stripe: a webhook endpoint (we_) or an event
// destination (ed_), whose payload must be the kind e's label says. Of an
// endpoint HOOKD_ENDPOINTS does not declare, Stripe's word on what it sends
// is its kind: a webhook endpoint sends snapshot events, a destination
// says which.
func (r *Reconciler) describe(ctx context.Context, e endpoint.Endpoint) (Surveyed, error) {
	s := Surveyed{Label: e.Label, StripeID: e.StripeID, Kind: e.Kind, Connect: e.Connect}
	if !e.Destination() {
		if e.Undeclared {
			s.Kind = endpoint.Snapshot
		}
		if s.Kind == endpoint.Thin {
			return s, fmt.Errorf("endpoint %q is labelled kind=thin, but %s is a webhook endpoint, which sends snapshot events: "+
				"only an event destination (ed_...) sends thin events", e.Label, e.StripeID)
		}
		ep, err := r.cfg.Client.Endpoint(ctx, e.StripeID)
		if err != nil {
			return s, err
		}
		s.Status, s.APIVersion, s.URL, s.EnabledEvents = ep.Status, ep.APIVersion, ep.URL, ep.EnabledEvents
		return s, nil
	}
	d, err := r.cfg.Client.Destination(ctx, e.StripeID)
	if err != nil {
		return s, err
	}
	if e.Undeclared {
		s.Kind = map[bool]endpoint.Kind{true: endpoint.Thin, false: endpoint.Snapshot}[d.Thin]
	}
	if d.Thin != (s.Kind == endpoint.Thin) {
		sends := map[bool]string{true: "thin", false: "snapshot"}
		return s, fmt.Errorf("endpoint %q is labelled kind=%s, but event destination %s sends %s events: set kind=%s in HOOKD_ENDPOINTS",
			e.Label, e.Kind, e.StripeID, sends[d.Thin], sends[d.Thin])
	}
	s.Status, s.APIVersion, s.URL, s.EnabledEvents = d.Status, d.APIVersion, d.URL, d.EnabledEvents
	return s, nil
}

// accounts are the connected accounts a Connect endpoint's run lists: those
// hookd saw events from through it since since, and the configured ones.
func (r *Reconciler) accounts(ctx context.Context, label string, since time.Time) ([]string, error) {
	seen, err := r.store.AccountsSeen(ctx, label, since)
	if err != nil {
		return nil, err
	}
	all := slices.Concat(seen, r.cfg.Accounts)
	slices.Sort(all)
	return slices.Compact(all), nil
}

// list lists s's events created since since, page by page: from
// /v2/core/events for a thin destination, from /v1/events otherwise; for
// a Connect endpoint once per account.
func (r *Reconciler) list(ctx context.Context, s Surveyed, since time.Time, page func([]stripeapi.Event) error) error {
	accounts := []string{""}
	if s.Connect {
		accounts = s.Accounts
	}
	for _, account := range accounts {
		var err error
		if s.Kind == endpoint.Thin {
			err = r.cfg.Client.ThinEvents(ctx, stripeapi.ThinQuery{Since: since, Types: typeFilter(s.EnabledEvents), Context: account}, page)
		} else {
			err = r.cfg.Client.AccountEvents(ctx, account, since, page)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// typeFilter is the types to ask /v2/core/events for: the destination's
// enabled events, unless it receives every type or more than one request
// may name, when the run filters them itself.
func typeFilter(enabled []string) []string {
	if slices.Contains(enabled, "*") || len(enabled) > 20 {
		return nil
	}
	return enabled
}

// recover runs todo through the pipeline, Concurrency at a time, in order,
// and counts the outcomes into res. It stops starting new events at the
// first error that is not the event's own (a database error) or when ctx
// is done, and returns that error.
func (r *Reconciler) recover(ctx context.Context, todo []pending, res *Result) error {
	work := context.WithoutCancel(ctx)
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	sem := make(chan struct{}, r.cfg.Concurrency)
	for _, p := range todo {
		mu.Lock()
		stop := firstErr != nil
		mu.Unlock()
		if stop || ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			outcome, err := r.receiver.RecoverThrough(work, p.label, p.ev.Payload)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, queue.ErrEventLocked):
				res.InFlight++
			case err != nil:
				if firstErr == nil {
					firstErr = fmt.Errorf("recover %s (endpoint %s): %w", p.ev.ID, p.label, err)
				}
			default:
				count(&res.Counts, outcome)
			}
		})
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	if res.Recovered+res.Queued > 0 {
		r.logger.InfoContext(ctx, "recovered events from Stripe", "recovered", res.Recovered, "queued", res.Queued,
			"examined", res.Examined, "window", humanize.Typed(res.Window))
	}
	return firstErr
}

func count(c *reconcileruns.Counts, o receiver.Outcome) {
	switch o {
	case receiver.Processed:
		c.Recovered++
	case receiver.Queued:
		c.Queued++
	case receiver.Duplicate:
		c.AlreadyProcessed++
	case receiver.AlreadyQueued:
		c.AlreadyQueued++
	}
}

// Pulled is what Pull did with one event.
type Pulled struct {
	Event   stripeapi.Event
	Outcome receiver.Outcome
}

// Pull reads one event from Stripe and runs it through the pipeline, as a
// run would, whatever its age: a person asked for it. It is read from
// /v1/events when a snapshot endpoint is reconciled, and from
// /v2/core/events when a thin one is and /v1/events has no such event (or
// no snapshot endpoint is). With an account (acct_...) it is an event of
// that connected account, read under it and run as having come through a
// Connect endpoint; without, one of the account's own. An event of a type
// no such endpoint receives is refused with ErrNotReceived (and so is any
// with an account when no Connect endpoint is reconciled); one a delivery
// is handling right now with queue.ErrEventLocked.
func (r *Reconciler) Pull(ctx context.Context, eventID, account string) (Pulled, error) {
	var snapshot, thin []Surveyed
	eps, err := r.endpoints(ctx)
	if err != nil {
		return Pulled{}, err
	}
	for _, e := range eps {
		if e.StripeID == "" || e.Connect != (account != "") {
			continue
		}
		s, err := r.describe(ctx, e)
		if err != nil {
			return Pulled{}, err
		}
		if s.Kind == endpoint.Thin {
			thin = append(thin, s)
		} else {
			snapshot = append(snapshot, s)
		}
	}
	if len(snapshot)+len(thin) == 0 && account != "" {
		return Pulled{}, fmt.Errorf("%s of %s: %w: no Connect endpoint with its Stripe id (connect=true, stripe_id=we_... or ed_...) "+
			"is configured to receive connected accounts' events", eventID, account, ErrNotReceived)
	}
	listed := snapshot
	var ev stripeapi.Event
	if len(snapshot) > 0 || len(thin) == 0 {
		ev, err = r.cfg.Client.AccountEvent(ctx, account, eventID)
	}
	if len(thin) > 0 && (len(snapshot) == 0 || errors.Is(err, stripeapi.ErrNotFound)) {
		listed = thin
		ev, err = r.cfg.Client.ThinEvent(ctx, account, eventID)
	}
	if err != nil {
		return Pulled{}, err
	}
	i := slices.IndexFunc(listed, func(s Surveyed) bool { return s.receives(ev.Type) })
	if i < 0 {
		ids := make([]string, len(listed))
		for i, s := range listed {
			ids[i] = s.StripeID
		}
		return Pulled{Event: ev}, fmt.Errorf("%s is a %s event: %w (%s)", ev.ID, ev.Type, ErrNotReceived, strings.Join(ids, ", "))
	}
	outcome, err := r.receiver.RecoverThrough(context.WithoutCancel(ctx), listed[i].Label, ev.Payload)
	if err != nil {
		return Pulled{Event: ev}, err
	}
	return Pulled{Event: ev, Outcome: outcome}, nil
}

// endpoints are the configured endpoints, each one HOOKD_ENDPOINTS does
// not declare with its kind and connect learned from what arrived through
// it (endpoint.Learned): a run reads Stripe's lists for what the endpoint
// really receives.
func (r *Reconciler) endpoints(ctx context.Context) ([]endpoint.Endpoint, error) {
	if !slices.ContainsFunc(r.cfg.Endpoints, func(e endpoint.Endpoint) bool { return e.Undeclared }) {
		return r.cfg.Endpoints, nil
	}
	arrived, err := r.store.EndpointsArrived(ctx, endpoint.ArrivedWindow)
	if err != nil {
		return nil, err
	}
	return endpoint.LearnedAll(r.cfg.Endpoints, arrived), nil
}

// PullsConnect says whether Pull takes events of connected accounts: a
// Connect endpoint is reconciled.
func (r *Reconciler) PullsConnect() bool {
	return slices.ContainsFunc(r.cfg.Endpoints, func(e endpoint.Endpoint) bool { return e.StripeID != "" && e.Connect })
}

// pollEvery bounds how long the schedule sleeps between looks at whether a
// run is due, so a shorter interval or another replica's run is noticed.
const pollEvery = time.Minute

// Run reconciles on the schedule until ctx is cancelled, then returns nil.
// Every replica runs this loop; each look takes the reconcile lock and runs
// only when the last run of any replica finished an Interval ago or more,
// so the replicas together run once per Interval. A failed run is logged
// and kept, and the next comes an Interval later. The first look is at
// start, so a new deployment reconciles at once. Without an Interval it
// returns at once.
func (r *Reconciler) Run(ctx context.Context) error {
	if r.cfg.Interval <= 0 {
		return nil
	}
	return r.schedule.Run(ctx)
}

// runSchedule looks whether a run is due at once, and then every Interval,
// or pollEvery when that is shorter, until ctx is cancelled.
func (r *Reconciler) runSchedule(ctx context.Context) {
	var labels []string
	for _, e := range r.cfg.Endpoints {
		if e.StripeID != "" {
			labels = append(labels, e.Label+"="+e.StripeID)
		}
	}
	r.logger.InfoContext(ctx, "reconcile schedule started", "interval", r.cfg.Interval,
		"window", humanize.Typed(r.cfg.Window), "endpoints", strings.Join(labels, ","))
	startstop.Loop(ctx, nil, func(ctx context.Context) time.Duration {
		res, err := r.RunOnce(ctx, Options{Trigger: reconcileruns.TriggerSchedule})
		switch {
		case err == nil:
			r.logger.InfoContext(ctx, "reconcile run", "summary", res.Summary())
		case errors.Is(err, errNotDue), errors.Is(err, reconcileruns.ErrRunning), ctx.Err() != nil:
		default:
			r.logger.ErrorContext(ctx, "reconcile run failed", "err", err)
		}
		return min(r.cfg.Interval, pollEvery)
	})
}

// errNotDue is RunOnce's answer to the schedule when the last run, of any
// replica, finished less than an Interval ago.
var errNotDue = errors.New("no reconcile run is due")

// due reports whether the last run of any replica finished at least an
// Interval ago, by the database's clock.
func (r *Reconciler) due(ctx context.Context) (bool, error) {
	last, err := r.runs.Last(ctx)
	if errors.Is(err, queue.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	now, err := r.store.Now(ctx)
	if err != nil {
		return false, err
	}
	return now.Sub(last.FinishedAt) >= r.cfg.Interval, nil
}
