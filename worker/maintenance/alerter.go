package maintenance

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/startstop"
	"github.com/hookd/hookd/internal/store/activity"
	"github.com/hookd/hookd/internal/store/alerts"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/internal/telemetry"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views/humanize"
	"github.com/hookd/hookd/worker"
)

// AlerterConfig configures an Alerter. Zero fields get the defaults below.
type AlerterConfig struct {
	// URL is the Slack-compatible incoming webhook alerts are posted to,
	// as {"text": "..."}.
	URL string
	// PublicURL is the dashboard's external URL, which makes the links in
	// alerts absolute. Default: none, the links are paths.
	PublicURL string
	// Interval is how often the conditions are checked, which is also how
	// deaths are batched: the first alert of a run of deaths names the
	// ones of up to one interval. Default: 1 minute.
	Interval time.Duration
	// PendingAge is the age of the oldest pending event past which it is
	// alerted on. Default: DefaultAlertPendingAge.
	PendingAge time.Duration
	// StalledAfter is how long the retry loop may go without looking for
	// due events before it counts as stalled. Default:
	// worker.RetrierStalledAfter(0).
	StalledAfter time.Duration
	// DeadQuiet is how long no event may go dead before the dead
	// condition clears. Default: 10 minutes, so events dying one by one
	// make one alert and not one each.
	DeadQuiet time.Duration
	// BreakerFailures is HOOKD_BREAKER_FAILURES, which the breaker's alert
	// names. Default: worker.DefaultBreakerFailures.
	BreakerFailures int
	// SendTimeout bounds one POST to URL. Default: 10 s.
	SendTimeout time.Duration
	// RetryBackoff is the wait after a failed POST, doubled after each
	// failure up to 5 minutes; SendAttempts is how many POSTs one alert
	// gets. Defaults: 1 s and 10 (about 8 minutes of waits in all).
	RetryBackoff time.Duration
	SendAttempts int
	// QueueSize bounds the alerts waiting to be sent; past it, new ones
	// are logged and dropped. Default: 100.
	QueueSize int
	// StopTimeout is how long, once Run's context is cancelled, the alerts
	// still waiting may take to be sent. Default: 5 s.
	StopTimeout time.Duration

	// Watching Stripe's side (watch.go). Endpoints are the labelled
	// endpoints; Stripe, when set, reads those with a stripe_id every
	// WatchInterval (default defaultWatchInterval) across replicas. Quiet
	// is HOOKD_ALERT_QUIET, an endpoint's quiet period unless it has its
	// own; 0 is off. NoticeQuiet is how long no event-generation-failure
	// notice may arrive before that condition clears. Default: 1 hour.
	Endpoints     []endpoint.Endpoint
	Stripe        *stripeapi.Client
	WatchInterval time.Duration
	Quiet         time.Duration
	NoticeQuiet   time.Duration
}

// DefaultAlertPendingAge is HOOKD_ALERT_PENDING_AGE's default: an event
// pending for an hour has failed its 1-minute, 5-minute and 30-minute
// retries, which is past a blip.
const DefaultAlertPendingAge = time.Hour

// Signature-failure burst: SignatureBurst failures within SignatureWindow
// start the condition; it clears once the window holds fewer than half as
// many, so a rate hovering around the threshold does not flap.
const (
	SignatureBurst  = 20
	SignatureWindow = 5 * time.Minute
)

// firstDeadIDs is how many ids of newly dead events an alert names.
const firstDeadIDs = 5

// Alerter checks hookd's alert conditions on a schedule and posts a message
// when one starts and when it clears. The conditions' state is in the
// database and changed under row locks, so however many replicas run an
// Alerter, each change is announced once. Messages are posted by a goroutine
// of their own from a bounded queue, so a slow or failing endpoint delays
// nothing but other alerts.
type Alerter struct {
	service *startstop.Service
	store   *queue.Store
	logger  *slog.Logger
	cfg     AlerterConfig
	client  *http.Client
	outbox  chan string
}

// NewAlerter returns an Alerter over store.
func NewAlerter(store *queue.Store, logger *slog.Logger, cfg AlerterConfig) *Alerter {
	cfg.Interval = cmp.Or(cfg.Interval, time.Minute)
	cfg.PendingAge = cmp.Or(cfg.PendingAge, DefaultAlertPendingAge)
	cfg.StalledAfter = cmp.Or(cfg.StalledAfter, worker.RetrierStalledAfter(0))
	cfg.DeadQuiet = cmp.Or(cfg.DeadQuiet, 10*time.Minute)
	cfg.BreakerFailures = cmp.Or(cfg.BreakerFailures, worker.DefaultBreakerFailures)
	cfg.SendTimeout = cmp.Or(cfg.SendTimeout, 10*time.Second)
	cfg.RetryBackoff = cmp.Or(cfg.RetryBackoff, time.Second)
	cfg.SendAttempts = cmp.Or(cfg.SendAttempts, 10)
	cfg.QueueSize = cmp.Or(cfg.QueueSize, 100)
	cfg.StopTimeout = cmp.Or(cfg.StopTimeout, telemetry.DefaultStopTimeout)
	cfg.WatchInterval = cmp.Or(cfg.WatchInterval, defaultWatchInterval)
	cfg.NoticeQuiet = cmp.Or(cfg.NoticeQuiet, time.Hour)
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	a := &Alerter{
		store:  store,
		logger: logger.With("component", "alerter"),
		cfg:    cfg,
		// An alert endpoint has no business redirecting; following one
		// could post the alert somewhere nobody configured.
		client: &http.Client{
			Timeout:       cfg.SendTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		outbox: make(chan string, cfg.QueueSize),
	}
	a.service = startstop.New(a.run)
	return a
}

// Run checks the conditions and posts the alerts until ctx is cancelled,
// then lets the alerts waiting be sent for up to StopTimeout, and returns
// nil.
func (a *Alerter) Run(ctx context.Context) error { return a.service.Run(ctx) }

// run checks the conditions at once and then every Interval, and posts the
// alerts, until ctx is cancelled. It then stops checking and lets the
// alerts waiting be sent for up to StopTimeout.
func (a *Alerter) run(ctx context.Context) {
	sendCtx, cancelSend := startstop.Outlive(ctx, a.cfg.StopTimeout)
	defer cancelSend()
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		a.send(sendCtx, ctx.Done())
	}()
	check := func(ctx context.Context) {
		if err := a.Check(ctx); err != nil && ctx.Err() == nil {
			a.logger.ErrorContext(ctx, "alert check failed", "err", err)
		}
	}
	check(ctx)
	startstop.Every(ctx, a.cfg.Interval, check)
	<-sent
}

// send posts the queued alerts in order until ctx is cancelled, or until
// stopping is closed and the queue is empty.
func (a *Alerter) send(ctx context.Context, stopping <-chan struct{}) {
	for {
		select {
		case text := <-a.outbox:
			a.deliver(ctx, text)
			continue
		default:
		}
		select {
		case text := <-a.outbox:
			a.deliver(ctx, text)
		case <-stopping:
			if len(a.outbox) == 0 {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// deliver posts one alert, retrying with backoff while the endpoint fails
// in a way that may pass: a network error, a 5xx or a 429.
func (a *Alerter) deliver(ctx context.Context, text string) {
	wait := a.cfg.RetryBackoff
	for attempt := 1; ; attempt++ {
		err := a.post(ctx, text)
		if err == nil {
			return
		}
		var perm *permanentError
		switch {
		case ctx.Err() != nil:
			a.logger.Error("alert not sent: stopping", "err", err, "alert", text)
			return
		case errors.As(err, &perm):
			a.logger.Error("alert refused by HOOKD_ALERT_URL; not retrying", "err", err, "alert", text)
			return
		case attempt >= a.cfg.SendAttempts:
			a.logger.Error("alert not sent: giving up", "attempts", attempt, "err", err, "alert", text)
			return
		}
		a.logger.Warn("cannot send alert; retrying", "attempt", attempt, "retry_in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		wait = min(2*wait, 5*time.Minute)
	}
}

// permanentError is an answer that retrying will not change: a 4xx other
// than 429, such as Slack's 404 for a revoked webhook.
type permanentError struct{ status string }

func (e *permanentError) Error() string { return "endpoint answered " + e.status }

func (a *Alerter) post(ctx context.Context, text string) error {
	body, err := json.Marshal(struct {
		Text string `json:"text"`
	}{text})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.cfg.URL, bytes.NewReader(body))
	if err != nil {
		// Not err itself: it quotes the URL, which is a secret (it carries
		// the webhook's token).
		return &permanentError{status: "nothing: HOOKD_ALERT_URL is not a URL"}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("post alert: %w", worker.WithoutURL(err))
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests:
		return &permanentError{status: fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(answer)))}
	default:
		return fmt.Errorf("endpoint answered %s: %s", resp.Status, strings.TrimSpace(string(answer)))
	}
}

// Announce posts text as an alert of its own, outside the conditions
// Check evaluates: an event worth a message at once (the emergency admin's
// sign-in). It never waits; the alert is sent while Run runs.
func (a *Alerter) Announce(ctx context.Context, text string) { a.enqueue(ctx, text) }

// enqueue hands text to the sending goroutine without ever waiting.
func (a *Alerter) enqueue(ctx context.Context, text string) {
	select {
	case a.outbox <- text:
	default:
		a.logger.ErrorContext(ctx, "alert dropped: too many alerts waiting to be sent", "alert", text)
	}
}

// Check evaluates every condition no other replica is checking right now,
// stores the changes, and once they are committed queues one alert per
// change. It never waits on the alert endpoint.
func (a *Alerter) Check(ctx context.Context) error {
	// Stripe is read before the transaction, which holds no connection
	// while Stripe's API answers.
	a.watch(ctx)
	if err := alerts.Ensure(ctx, a.store.DB(), a.endpointConditions()); err != nil {
		return err
	}
	var texts []string
	err := a.store.InTx(ctx, func(tx *queue.Tx) error {
		texts = texts[:0]
		states, now, err := alerts.Lock(ctx, tx.PgxTx())
		if err != nil {
			return err
		}
		for _, st := range states {
			next, text, err := a.evaluate(ctx, tx, st, now)
			if err != nil {
				return err
			}
			if next != st {
				if err := alerts.Set(ctx, tx.PgxTx(), next); err != nil {
					return err
				}
			}
			if text != "" {
				texts = append(texts, text)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, text := range texts {
		a.logger.InfoContext(ctx, "alert", "alert", text)
		a.enqueue(ctx, text)
	}
	return nil
}

// evaluate reads one condition's facts and returns its next state and the
// alert text of its change, "" when it did not start or clear.
func (a *Alerter) evaluate(ctx context.Context, tx *queue.Tx, st alerts.State, now time.Time) (alerts.State, string, error) {
	if kind, label, ok := st.Condition.Endpoint(); ok {
		return a.evaluateEndpoint(ctx, tx, st, kind, label, now)
	}
	if eval, ok := evaluators[st.Condition]; ok {
		return eval(a, ctx, tx, st, now)
	}
	return st, "", nil
}

// evaluators evaluate each condition that is not an endpoint's.
var evaluators = map[alerts.Condition]func(*Alerter, context.Context, *queue.Tx, alerts.State, time.Time) (alerts.State, string, error){
	alerts.Dead:               (*Alerter).evaluateDead,
	alerts.GenerationFailures: (*Alerter).evaluateGenerationFailures,
	alerts.PendingAge:         (*Alerter).evaluatePendingAge,
	alerts.RetrierStalled:     (*Alerter).evaluateRetrierStalled,
	alerts.BreakerOpen:        (*Alerter).evaluateBreaker,
	alerts.SignatureFailures:  (*Alerter).evaluateSignatureFailures,
	alerts.HeldKeys:           (*Alerter).evaluateHeldKeys,
}

// evaluatePendingAge: the oldest pending event has waited longer than
// HOOKD_ALERT_PENDING_AGE. With several destinations it names each one
// whose oldest pending delivery has.
func (a *Alerter) evaluatePendingAge(ctx context.Context, tx *queue.Tx, st alerts.State, now time.Time) (alerts.State, string, error) {
	oldest, pending, err := tx.OldestPending(ctx)
	if err != nil {
		return st, "", err
	}
	holds := oldest != nil && now.Sub(oldest.ReceivedAt) > a.cfg.PendingAge
	var behind []queue.DestinationStat
	if holds && !st.Active {
		if behind, err = a.behind(ctx, tx, now); err != nil {
			return st, "", err
		}
		if len(behind) == 1 && behind[0].Destination == queue.DefaultDestination {
			behind = nil // the one app's: nothing to name
		}
	}
	return transition(st, holds, now, func() string {
		link, to, where := a.link("/events?status=pending"), "", ""
		if len(behind) > 0 {
			to = ", to " + escape(oldest.Destination)
			parts := make([]string, len(behind))
			for i, d := range behind {
				parts[i] = fmt.Sprintf("%s (%s, oldest %s)", escape(d.Destination), plural(d.Failed+d.Retrying, "pending", "pending"),
					humanize.Duration(now.Sub(*d.Oldest)))
			}
			where = " Behind: " + strings.Join(parts, ", ") + "."
			if len(behind) == 1 {
				link = a.link("/events?" + url.Values{"status": {"pending"}, "destination": {behind[0].Destination}}.Encode())
			}
		}
		return fmt.Sprintf("hookd: the oldest pending event, %s (%s%s), has waited %s, longer than HOOKD_ALERT_PENDING_AGE (%s); %s pending.%s %s",
			escape(oldest.EventID), escape(oldest.EventType), to, humanize.Duration(now.Sub(oldest.ReceivedAt)), humanize.Duration(a.cfg.PendingAge),
			plural(pending, "event is", "events are"), where, link)
	}, func() string {
		return fmt.Sprintf("hookd: cleared: no pending event is older than %s any more. %s",
			humanize.Duration(a.cfg.PendingAge), a.link("/events?status=pending"))
	})
}

// behind returns the destinations whose oldest pending delivery has
// waited longer than HOOKD_ALERT_PENDING_AGE, the longest waiting first.
func (a *Alerter) behind(ctx context.Context, tx *queue.Tx, now time.Time) ([]queue.DestinationStat, error) {
	stats, err := tx.DestinationStats(ctx)
	if err != nil {
		return nil, err
	}
	var behind []queue.DestinationStat
	for _, d := range stats {
		if d.Oldest != nil && now.Sub(*d.Oldest) > a.cfg.PendingAge {
			behind = append(behind, d)
		}
	}
	slices.SortStableFunc(behind, func(x, y queue.DestinationStat) int { return x.Oldest.Compare(*y.Oldest) })
	return behind, nil
}

// evaluateRetrierStalled: no replica's retry loop has looked for due
// events for longer than StalledAfter.
func (a *Alerter) evaluateRetrierStalled(ctx context.Context, tx *queue.Tx, st alerts.State, now time.Time) (alerts.State, string, error) {
	ws, err := tx.WorkerStatus(ctx)
	if err != nil {
		return st, "", err
	}
	holds := ws.RetrierTick != nil && now.Sub(*ws.RetrierTick) > a.cfg.StalledAfter
	return transition(st, holds, now, func() string {
		return fmt.Sprintf("hookd: the retry loop is stalled: no replica has looked for due events since %s (%s ago), so failed events are not retried. Check that hookd is running and its log. %s",
			ws.RetrierTick.UTC().Format("15:04:05 UTC"), humanize.Duration(now.Sub(*ws.RetrierTick)), a.link("/"))
	}, func() string {
		return fmt.Sprintf("hookd: cleared: the retry loop is running again. %s", a.link("/"))
	})
}

// evaluateBreaker: the circuit breaker is open, delivery paused.
func (a *Alerter) evaluateBreaker(ctx context.Context, tx *queue.Tx, st alerts.State, now time.Time) (alerts.State, string, error) {
	dc, err := tx.ReadDeliveryControl(ctx)
	if err != nil {
		return st, "", err
	}
	return transition(st, dc.BreakerOpen(), now, func() string {
		return fmt.Sprintf("hookd: the circuit breaker is open: %d deliveries in a row said the app is down (last: %s), "+
			"so delivery is paused and events wait on the queue with no attempt spent. hookd probes the app with one event "+
			"and resumes on its first success. %s",
			a.cfg.BreakerFailures, escape(dc.BreakerError), a.link("/"))
	}, func() string {
		return fmt.Sprintf("hookd: cleared: the circuit breaker closed, the app answers again; the queue drains at HOOKD_FORWARD_RATE. %s",
			a.link("/events?status=pending"))
	})
}

// evaluateSignatureFailures: SignatureBurst deliveries failed the
// signature check within SignatureWindow; once started, the condition
// holds until they are down to half that.
func (a *Alerter) evaluateSignatureFailures(ctx context.Context, tx *queue.Tx, st alerts.State, now time.Time) (alerts.State, string, error) {
	n, err := activity.New(tx.PgxTx()).SignatureFailures(ctx, SignatureWindow)
	if err != nil {
		return st, "", err
	}
	holds := n >= SignatureBurst || (st.Active && n >= SignatureBurst/2)
	return transition(st, holds, now, func() string {
		return fmt.Sprintf("hookd: %s failed the Stripe signature check in the last %s: is STRIPE_WEBHOOK_SECRET right? %s",
			plural(n, "delivery", "deliveries"), humanize.Duration(SignatureWindow), a.link("/rejections"))
	}, func() string {
		return fmt.Sprintf("hookd: cleared: signature failures are down to %d in the last %s. %s",
			n, humanize.Duration(SignatureWindow), a.link("/rejections"))
	})
}

// transition is the start-and-clear rule of a condition that holds or not.
func transition(st alerts.State, holds bool, now time.Time, started, cleared func() string) (alerts.State, string, error) {
	switch {
	case holds && !st.Active:
		return alerts.State{Condition: st.Condition, Active: true, Since: &now, LastSeen: &now, CreatedAt: st.CreatedAt}, started(), nil
	case holds:
		st.LastSeen = &now
		return st, "", nil
	case st.Active:
		return alerts.State{Condition: st.Condition, CreatedAt: st.CreatedAt}, cleared(), nil
	}
	return st, "", nil
}

// evaluateDead takes the events that went dead since the last check. The
// first ones start the condition, with their count, types and first ids;
// the ones after that are only counted, until no event has gone dead for
// DeadQuiet, when it clears with the total.
func (a *Alerter) evaluateDead(ctx context.Context, tx *queue.Tx, st alerts.State, now time.Time) (alerts.State, string, error) {
	dead, err := tx.TakeNewlyDead(ctx)
	if err != nil {
		return st, "", err
	}
	link := a.link("/events?status=dead")
	switch {
	case len(dead) > 0 && !st.Active:
		n := int64(len(dead))
		next := alerts.State{Condition: st.Condition, Active: true, Since: &now, LastSeen: &now, Count: n, CreatedAt: st.CreatedAt}
		ids := make([]string, 0, firstDeadIDs)
		for _, d := range dead[:min(len(dead), firstDeadIDs)] {
			ids = append(ids, escape(d.EventID))
		}
		more := ""
		if len(dead) > firstDeadIDs {
			more = ", …"
		}
		to, dests := deadDestinations(dead)
		if len(dests) == 1 {
			link = a.link("/events?" + url.Values{"status": {"dead"}, "destination": {dests[0]}}.Encode())
		}
		return next, fmt.Sprintf("hookd: %s dead, out of retries: %s.%s First: %s%s. %s",
			plural(n, "event went", "events went"), deadTypes(dead), to, strings.Join(ids, ", "), more, link), nil
	case len(dead) > 0:
		st.LastSeen = &now
		st.Count += int64(len(dead))
		return st, "", nil
	case st.Active && st.LastSeen != nil && now.Sub(*st.LastSeen) >= a.cfg.DeadQuiet:
		stillDead, err := tx.CountEvents(ctx, queue.EventFilter{Status: queue.StatusDead})
		if err != nil {
			return st, "", err
		}
		return alerts.State{Condition: st.Condition, CreatedAt: st.CreatedAt}, fmt.Sprintf(
			"hookd: cleared: no event has gone dead for %s. %s dead since %s; %s dead now. %s",
			humanize.Duration(a.cfg.DeadQuiet), plural(st.Count, "event went", "events went"),
			st.Since.UTC().Format("2006-01-02 15:04 UTC"), plural(stillDead, "event is", "events are"), link), nil
	}
	return st, "", nil
}

// deadDestinations names the destinations of dead deliveries, the
// commonest first, " Destinations: billing ×2, crm ×1." and their names;
// "" and none when every one is the one app's, default.
func deadDestinations(dead []queue.DeadEvent) (string, []string) {
	counts := map[string]int{}
	for _, d := range dead {
		counts[d.Destination]++
	}
	if _, only := counts[queue.DefaultDestination]; only && len(counts) == 1 {
		return "", nil
	}
	names := slices.Collect(maps.Keys(counts))
	slices.SortFunc(names, func(x, y string) int { return cmp.Or(counts[y]-counts[x], strings.Compare(x, y)) })
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s ×%d", escape(n), counts[n])
	}
	return " Destinations: " + strings.Join(parts, ", ") + ".", names
}

// deadTypes counts dead events by type, the commonest first: "invoice.paid
// ×3, charge.refunded ×1".
func deadTypes(dead []queue.DeadEvent) string {
	counts := map[string]int{}
	for _, d := range dead {
		counts[d.EventType]++
	}
	types := make([]string, 0, len(counts))
	for t := range counts {
		types = append(types, t)
	}
	slices.SortFunc(types, func(x, y string) int {
		return cmp.Or(counts[y]-counts[x], strings.Compare(x, y))
	})
	parts := make([]string, len(types))
	for i, t := range types {
		parts[i] = fmt.Sprintf("%s ×%d", escape(t), counts[t])
	}
	return strings.Join(parts, ", ")
}

// link is the dashboard URL of path: absolute with PublicURL, a path
// without.
func (a *Alerter) link(path string) string {
	return a.cfg.PublicURL + path
}

// escape makes s plain text in a Slack message, whose text treats &, < and
// > as markup.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
