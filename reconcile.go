package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/config"
	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/store/reconcileruns"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/worker"
	"github.com/hookd/hookd/worker/reconcile"
)

// reconcileCommand runs `hookd reconcile [-since 72h] [-dry-run] [-event
// evt_... [-account acct_...]]`: one reconciliation with Stripe's Events API, through the same
// pipeline and processor as hookd serve. It prints one summary line; an
// error from Stripe's API is one line on stderr and a non-zero exit, with
// nothing changed.
func reconcileCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var f reconcileFlags
	cfg, err := config.Parse("reconcile", args, getenv, stderr, f.define)
	if err != nil {
		return err
	}
	if err := f.check(cfg); err != nil {
		return err
	}

	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	var pool *pgxpool.Pool
	if f.dryRun {
		pool, err = openCurrent(ctx, cfg)
	} else {
		pool, _, err = openMigrated(ctx, cfg)
	}
	if err != nil {
		return err
	}
	defer pool.Close()
	proc, err := newProcessor(cfg, logger, nil)
	if err != nil {
		return err
	}
	store, hb, stop, err := reconcileReplica(ctx, pool, f.dryRun, logger)
	if err != nil {
		return err
	}
	defer stop()
	receiver := receiver.New(store, logger, receiver.Config{
		Endpoints: cfg.Endpoints, SnapshotAlias: cfg.SnapshotAlias, Processor: proc, ProcessTimeout: cfg.ForwardTimeout,
		Heartbeat: hb})
	r := newReconciler(cfg, newStripeClient(cfg, logger), store, receiver, logger)

	if f.eventID != "" {
		return pullCommand(ctx, r, f.eventID, f.account, stdout)
	}
	return reconcileWindow(ctx, r, f.since, f.dryRun, stdout, stderr)
}

// reconcileFlags are the flags of `hookd reconcile` beside the settings.
type reconcileFlags struct {
	since            time.Duration
	dryRun           bool
	eventID, account string
}

func (f *reconcileFlags) define(fs *flag.FlagSet) {
	fs.Func("since", "how far back to look, like 72h (default: $HOOKD_RECONCILE_WINDOW; at most 720h)", func(v string) error {
		return config.ParseReconcileWindow(&f.since, v)
	})
	fs.BoolVar(&f.dryRun, "dry-run", false, "list and count the events, but process nothing and record nothing")
	fs.StringVar(&f.eventID, "event", "", "pull this one event (evt_...) from Stripe instead of a window")
	fs.StringVar(&f.account, "account", "", "with -event: the event is of this connected account (acct_...), "+
		"and came through a Connect endpoint")
}

// check says what stops a reconciliation with f and cfg before it starts:
// no key or no endpoint to ask Stripe about, flags that do not go
// together, or a window longer than the markers are kept.
func (f *reconcileFlags) check(cfg config.Config) error {
	if cfg.StripeAPIKey == "" || !slices.ContainsFunc(reconcileEndpoints(cfg), func(e endpoint.Endpoint) bool { return e.StripeID != "" }) {
		return errors.New("STRIPE_API_KEY and STRIPE_WEBHOOK_ENDPOINT_ID (or a stripe_id in HOOKD_ENDPOINTS): both are needed " +
			"to reconcile (a restricted key with Read access to Events and Webhook Endpoints, and the we_... id of hookd's endpoint)")
	}
	if f.eventID != "" && (f.dryRun || f.since != 0) {
		return errors.New("-event pulls one event: it takes neither -since nor -dry-run")
	}
	if f.eventID != "" && !strings.HasPrefix(f.eventID, "evt_") {
		return fmt.Errorf("-event: %q is not a Stripe event id (evt_...)", f.eventID)
	}
	if f.account != "" && f.eventID == "" {
		return errors.New("-account names the connected account of the one event -event pulls: it needs -event")
	}
	if f.account != "" && !strings.HasPrefix(f.account, "acct_") {
		return fmt.Errorf("-account: %q is not a Stripe account id (acct_...)", f.account)
	}
	return reconcile.CheckWindow("-since", f.since, cfg.MarkerRetention)
}

// reconcileReplica returns the store the command works through. A dry run
// takes no lease and needs no replica. Otherwise the command recovers
// events as hookd serve does: a replica of its own, whose heartbeat keeps
// its leases live while it runs, until stop.
func reconcileReplica(ctx context.Context, pool *pgxpool.Pool, dryRun bool, logger *slog.Logger) (
	store *queue.Store, hb *worker.Heartbeat, stop func(), err error) {
	if dryRun {
		return queue.New(pool), nil, func() {}, nil
	}
	store = queue.New(pool, queue.WithReplica(uuid.New()))
	hb = worker.NewHeartbeat(store, logger)
	if err := hb.Register(ctx); err != nil {
		return nil, nil, nil, err
	}
	beatCtx, stopBeating := context.WithCancel(ctx)
	beating := make(chan struct{})
	go func() { defer close(beating); _ = hb.Run(beatCtx) }()
	return store, hb, func() { stopBeating(); <-beating }, nil
}

// pullCommand is `hookd reconcile -event [-account]`: it pulls one event
// and says what became of it.
func pullCommand(ctx context.Context, r *reconcile.Reconciler, eventID, account string, stdout io.Writer) error {
	p, err := r.Pull(ctx, eventID, account)
	if errors.Is(err, queue.ErrEventLocked) {
		return fmt.Errorf("%s is being handled by a delivery right now; it needs no pull", eventID)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, pulledText(p))
	return nil
}

// reconcileWindow is `hookd reconcile` over a window: one run, its summary
// on stdout, and notes on stderr about what Stripe told of the endpoint.
func reconcileWindow(ctx context.Context, r *reconcile.Reconciler, since time.Duration, dryRun bool, stdout, stderr io.Writer) error {
	res, err := r.RunOnce(ctx, reconcile.Options{Window: since, DryRun: dryRun, Trigger: reconcileruns.TriggerCommand})
	if errors.Is(err, reconcileruns.ErrRunning) {
		return errors.New("another reconcile run is in progress (the schedule of hookd serve, or an operator); try again when it ends")
	}
	if err != nil {
		if res.Recovered+res.Queued > 0 {
			fmt.Fprintln(stdout, res.Summary())
		}
		return err
	}
	fmt.Fprintln(stdout, res.Summary())
	for _, s := range res.Disabled() {
		fmt.Fprintf(stderr, "note: Stripe has disabled endpoint %s (%s) and sends it nothing; re-enable it in Stripe's dashboard\n", s.StripeID, s.Label)
	}
	if res.OtherVersion > 0 {
		fmt.Fprintf(stderr, "note: %d of these events are rendered in another API version than their endpoint's; check each one's api_version\n",
			res.OtherVersion)
	}
	return nil
}

// pulledText says in one line what a pull did.
func pulledText(p reconcile.Pulled) string {
	head := fmt.Sprintf("%s (%s): ", p.Event.ID, p.Event.Type)
	switch p.Outcome {
	case receiver.Processed:
		return head + "recovered: processed now"
	case receiver.Queued:
		return head + "processing failed; it is on the retry queue"
	case receiver.Duplicate:
		return head + "already processed; nothing to do"
	case receiver.AlreadyQueued:
		return head + "already on the retry queue; nothing to do"
	}
	return head + p.Outcome.String()
}

// newStripeClient returns the client of Stripe's API the process shares,
// on one budget of HOOKD_STRIPE_API_RATE, or nil without STRIPE_API_KEY.
func newStripeClient(cfg config.Config, logger *slog.Logger) *stripeapi.Client {
	if cfg.StripeAPIKey == "" {
		return nil
	}
	return stripeapi.New(stripeapi.Config{Key: cfg.StripeAPIKey.Reveal(), URL: cfg.StripeAPIURL, Logger: logger,
		Budget: stripeapi.NewBudget(cfg.StripeAPIRate)})
}

// reconcileEndpoints are the endpoints reconciliation reads: the labelled
// ones, or without any signing secret the one STRIPE_WEBHOOK_ENDPOINT_ID
// names.
func reconcileEndpoints(cfg config.Config) []endpoint.Endpoint {
	if len(cfg.Endpoints) > 0 || cfg.StripeEndpointID == "" {
		return cfg.Endpoints
	}
	e := endpoint.New(endpoint.DefaultLabel)
	e.StripeID, e.Undeclared = cfg.StripeEndpointID, true
	return []endpoint.Endpoint{e}
}

// newReconciler returns the reconciler the configuration asks for, over
// client, or nil when there is no client or no endpoint has a Stripe id.
func newReconciler(cfg config.Config, client *stripeapi.Client, store *queue.Store, receiver *receiver.Receiver, logger *slog.Logger) *reconcile.Reconciler {
	eps := reconcileEndpoints(cfg)
	if client == nil || !slices.ContainsFunc(eps, func(e endpoint.Endpoint) bool { return e.StripeID != "" }) {
		return nil
	}
	return reconcile.New(store, receiver, logger, reconcile.Config{
		Client: client, Endpoints: eps, Accounts: cfg.ReconcileAccounts,
		Window: cfg.ReconcileWindow, Interval: cfg.ReconcileInterval, MaxWindow: cfg.MarkerRetention,
	})
}
