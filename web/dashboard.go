package web

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/activity"
	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/internal/store/reconcileruns"
	"github.com/hookd/hookd/internal/store/rejections"
	"github.com/hookd/hookd/internal/stripeapi"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views"
	"github.com/hookd/hookd/worker"
	"github.com/hookd/hookd/worker/maintenance"
)

// perPage is the length of the event lists and the audit log.
const perPage = 50

// dashboard holds what the dashboard's handlers share.
type dashboard struct {
	logger *slog.Logger
	// store is the queue for the actions people take; reads, for what
	// the pages show. counts and rejections are read for the pages too.
	store      *queue.Store
	reads      *queue.Store
	accounts   *accounts.Store
	audit      *audit.Log
	counts     *activity.Store
	rejections *rejections.Store
	opts       Options
	sessions   sessionManagers
	// passwordChecks holds a slot per password check running.
	passwordChecks *checkSlots
	// formKeys signs the sign-in form's token and checks it.
	formKeys *accounts.KeyRing
	// deviceKeys signs the cookies of known browsers (signin.go).
	deviceKeys *accounts.KeyRing
}

func newDashboard(opts Options) *dashboard {
	opts = withDefaults(opts)
	return &dashboard{
		logger:     opts.Logger.With("component", "dashboard"),
		store:      opts.Stores.Queue,
		reads:      cmp.Or(opts.Stores.Reads, opts.Stores.Queue),
		accounts:   opts.Stores.Accounts,
		audit:      opts.Stores.Audit,
		counts:     opts.Stores.Activity,
		rejections: opts.Stores.Rejections,
		opts:       opts,
		sessions:   newSessionManagers(opts.Sessions, opts.SecureCookies, opts.SessionMaxAge),

		passwordChecks: newCheckSlots(maxPasswordChecks),
		formKeys:       opts.FormKeys,
		deviceKeys:     deviceKeys(opts),
	}
}

// overviewStats reads the overview's stats block; delivery is delivery
// control as the page shows it, which decides with the loops' status
// whether due events are stuck or held.
func (d *dashboard) overviewStats(ctx context.Context, delivery queue.DeliveryControl) (views.OverviewStats, error) {
	st, err := d.reads.Stats(ctx)
	if err != nil {
		return views.OverviewStats{}, err
	}
	ws, err := d.reads.WorkerStatus(ctx)
	if err != nil {
		return views.OverviewStats{}, err
	}
	refused, err := d.rejections.ByReason(ctx, 24*time.Hour)
	if err != nil {
		return views.OverviewStats{}, err
	}
	wait := queue.DueWaitOf(delivery, ws)
	stuck, err := d.reads.CountStuck(ctx, queue.OverdueAfter, wait)
	if err != nil {
		return views.OverviewStats{}, err
	}
	endpoints, err := d.reads.EndpointsActivity(ctx)
	if err != nil {
		return views.OverviewStats{}, err
	}
	stats := views.OverviewStats{Stats: st, Worker: ws, AliveWithin: worker.RetrierStalledAfter(d.opts.RetryInterval),
		Refused: refused, Stuck: stuck, Wait: wait, Delivery: delivery, ReconcileOn: d.opts.Reconciler != nil, Rate: d.opts.Pace.PerSecond(),
		Endpoints: endpoints}
	switch run, err := reconcileruns.New(d.reads.DB()).Last(ctx); {
	case err == nil:
		stats.Reconcile = &run
	case !errors.Is(err, queue.ErrNotFound):
		return views.OverviewStats{}, err
	}
	return stats, nil
}

func (d *dashboard) retentionDays() string {
	return strconv.Itoa(max(minPruneDays, int(d.opts.MarkerRetention/(24*time.Hour))))
}

// minPruneDays is Stripe's redelivery window in days: a marker pruned
// sooner lets a redelivery of its event be processed again.
const minPruneDays = int(maintenance.MinMarkerRetention / (24 * time.Hour))

// renderOverview renders the overview; prune and rec carry the state of
// its forms, zero for their defaults.
func (d *dashboard) renderOverview(c echo.Context, status int, prune views.PruneForm, rec views.ReconcileForm) error {
	delivery := d.opts.Control.State()
	st, err := d.overviewStats(c.Request().Context(), delivery)
	if err != nil {
		return err
	}
	activity, err := d.activity(c)
	if err != nil {
		return err
	}
	if prune.Days == "" && prune.Error == "" {
		prune.Days = d.retentionDays()
	}
	if d.opts.Reconciler != nil {
		rec.MaxHours = int(d.opts.Reconciler.MaxWindow() / time.Hour)
		if rec.Hours == "" && rec.Error == "" {
			rec.Hours = strconv.Itoa(int(d.opts.Reconciler.Window() / time.Hour))
		}
	}
	p := d.pageWith(c, "Overview", "overview", delivery)
	if p.Contradictions, err = d.contradictions(c.Request().Context(), ""); err != nil {
		return err
	}
	return render(c, status, views.Overview(p, st, activity, prune, rec))
}

// activity reads the counts behind the overview's charts, over the range
// ?activity= asks for.
func (d *dashboard) activity(c echo.Context) (views.Activity, error) {
	r := views.ParseActivityRange(c.QueryParam("activity"))
	buckets, err := d.counts.Buckets(c.Request().Context(), r.Query())
	if err != nil {
		return views.Activity{}, err
	}
	return views.Activity{Range: r, Buckets: buckets}, nil
}

// handleOverviewActivity renders the overview's charts alone, for htmx.
func (d *dashboard) handleOverviewActivity() echo.HandlerFunc {
	return func(c echo.Context) error {
		activity, err := d.activity(c)
		if err != nil {
			return err
		}
		noStore(c)
		return render(c, http.StatusOK, views.ActivityPanel(activity))
	}
}

func (d *dashboard) handleOverview() echo.HandlerFunc {
	return func(c echo.Context) error {
		return d.renderOverview(c, http.StatusOK, views.PruneForm{}, views.ReconcileForm{})
	}
}

// handleOverviewStats renders the overview's stats block alone, for htmx.
func (d *dashboard) handleOverviewStats() echo.HandlerFunc {
	return func(c echo.Context) error {
		st, err := d.overviewStats(c.Request().Context(), d.opts.Control.State())
		if err != nil {
			return err
		}
		noStore(c)
		return render(c, http.StatusOK, views.OverviewStatsBlock(st))
	}
}

// pruneDays reads the prune form's days; ok is false, with the overview
// re-rendered saying what is wrong, when they are not a whole number of at
// least minPruneDays.
func (d *dashboard) pruneDays(c echo.Context) (days int, ok bool, err error) {
	raw := strings.TrimSpace(c.FormValue("days"))
	days, perr := strconv.Atoi(raw)
	if perr != nil || days < minPruneDays {
		return 0, false, d.renderOverview(c, http.StatusUnprocessableEntity, views.PruneForm{
			Days: raw,
			Error: fmt.Sprintf("Days must be a whole number, at least %d: Stripe redelivers an event for up to %d days, "+
				"and a redelivery whose marker was pruned would be processed again.", minPruneDays, minPruneDays),
		}, views.ReconcileForm{})
	}
	// Beyond this, days*24h overflows a time.Duration; nothing is that old.
	return min(days, 100_000), true, nil
}

func (d *dashboard) handlePrunePreview() echo.HandlerFunc {
	return func(c echo.Context) error {
		days, ok, err := d.pruneDays(c)
		if !ok {
			return err
		}
		n, err := d.reads.CountPrunable(c.Request().Context(), time.Duration(days)*24*time.Hour)
		if err != nil {
			return err
		}
		return render(c, http.StatusOK, views.PruneConfirm(d.page(c, "Prune markers?", "overview"), days, n))
	}
}

func (d *dashboard) handlePrune() echo.HandlerFunc {
	return func(c echo.Context) error {
		days, ok, err := d.pruneDays(c)
		if !ok {
			return err
		}
		ctx := c.Request().Context()
		var removed int64
		// One transaction for the prune and its audit entry: on a very
		// large prune that is one long transaction rather than the pruner's
		// short batches, the price of never losing the record of it.
		err = d.store.InTx(ctx, func(tx *queue.Tx) error {
			var err error
			if removed, err = tx.PruneProcessed(ctx, time.Duration(days)*24*time.Hour); err != nil {
				return err
			}
			if err := tx.RecordPrune(ctx, removed); err != nil {
				return err
			}
			return audit.Record(ctx, tx.PgxTx(), currentUser(c).Email, audit.Prune, "markers older than "+daysText(days), removed)
		})
		if err != nil {
			return err
		}
		flash(c, fmt.Sprintf("Removed %s markers older than %s", views.Count(removed), daysText(days)))
		return c.Redirect(http.StatusSeeOther, "/")
	}
}

// daysText is always plural, "1 days" included: the confirmation and the
// flash keep one fixed wording that tests and people can search for.
func daysText(days int) string {
	return views.Count(int64(days)) + " days"
}

// listFilter reads an event filter from the request's query or form.
func listFilter(c echo.Context, status queue.Status) queue.EventFilter {
	return queue.EventFilter{
		Status:        status,
		EventType:     strings.TrimSpace(c.FormValue("type")),
		ErrorContains: strings.TrimSpace(c.FormValue("error")),
		EventID:       strings.TrimSpace(c.FormValue("q")),
		ErrorGroup:    c.FormValue("group"),
		StuckAfter:    stuckAfter(c.FormValue("stuck") != ""),
		Endpoint:      strings.TrimSpace(c.FormValue("endpoint")),
		Livemode:      views.ParseMode(c.FormValue("mode")),
		Account:       strings.TrimSpace(c.FormValue("account")),
	}
}

// stuckAfter is what a stuck filter calls overdue when on: OverdueAfter,
// which hookd does not let anyone configure.
func stuckAfter(on bool) time.Duration {
	if on {
		return queue.OverdueAfter
	}
	return 0
}

// listURL is the URL of one page of the list f selects.
func listURL(f queue.EventFilter, page int) string {
	q := url.Values{"status": {string(f.Status)}}
	for k, v := range map[string]string{"type": f.EventType, "error": f.ErrorContains, "q": f.EventID,
		"group": f.ErrorGroup, "endpoint": f.Endpoint, "mode": views.ModeValue(f.Livemode), "account": f.Account} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.StuckAfter > 0 {
		q.Set("stuck", "1")
	}
	if page > 1 {
		q.Set("page", strconv.Itoa(page))
	}
	return "/events?" + q.Encode()
}

func (d *dashboard) handleEvents() echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		status, err := listStatus(c.QueryParam("status"))
		if err != nil {
			return err
		}
		pageNum := pageParam(c)
		f := listFilter(c, status)
		f.Limit, f.Offset = perPage, (pageNum-1)*perPage
		delivery := d.opts.Control.State()
		if status != queue.StatusDead {
			if f.Wait, err = d.dueWait(ctx, delivery); err != nil {
				return err
			}
		}
		l, err := d.eventList(ctx, status, f, pageNum)
		if err != nil {
			return err
		}
		title, nav := "Dead events", "dead"
		if status != queue.StatusDead {
			title, nav = "Pending events", "pending"
			if l.Failed, err = d.reads.CountEvents(ctx, queue.EventFilter{Status: queue.StatusFailed}); err != nil {
				return err
			}
			if l.Retrying, err = d.reads.CountEvents(ctx, queue.EventFilter{Status: queue.StatusRetrying}); err != nil {
				return err
			}
		}
		p := d.pageWith(c, title, nav, delivery)
		if f.Endpoint != "" {
			if p.Contradictions, err = d.contradictions(ctx, f.Endpoint); err != nil {
				return err
			}
		}
		return render(c, http.StatusOK, views.Events(p, l))
	}
}

// listStatus is the list a status parameter names: dead when it names
// none; a status with no list is a 400.
func listStatus(param string) (queue.Status, error) {
	switch status := queue.Status(param); status {
	case "":
		return queue.StatusDead, nil
	case queue.StatusDead, queue.StatusPending, queue.StatusFailed, queue.StatusRetrying:
		return status, nil
	default:
		return "", echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf(
			"There is no list of %q events: the lists are dead, pending, failed and retrying.", status))
	}
}

// eventList reads page pageNum of the list of status f selects, which of
// its events are in flight, and its neighbouring pages' URLs. When f
// searched for an id the list does not have, it says where the event is,
// so nobody has to try every list.
func (d *dashboard) eventList(ctx context.Context, status queue.Status, f queue.EventFilter, pageNum int) (views.EventList, error) {
	page, err := d.reads.Events(ctx, f)
	if err != nil {
		return views.EventList{}, err
	}
	l := views.EventList{Status: status, Filter: f, Page: page, PageNum: pageNum, PerPage: perPage,
		Self: listURL(f, pageNum), CanPull: d.opts.Reconciler != nil, OverdueAfter: queue.OverdueAfter, Wait: f.Wait}
	ids := make([]string, len(page.Events))
	for i, e := range page.Events {
		ids[i] = e.EventID
	}
	if l.InFlight, err = d.reads.EventsInFlight(ctx, ids); err != nil {
		return views.EventList{}, err
	}
	if len(page.Events) == 0 && f.EventID != "" {
		if l.Search, err = d.findEvent(ctx, f.EventID); err != nil {
			return views.EventList{}, err
		}
	}
	if pageNum > 1 {
		l.Prev = listURL(f, pageNum-1)
	}
	if int64(f.Offset+len(page.Events)) < page.Total {
		l.Next = listURL(f, pageNum+1)
	}
	return l, nil
}

// contradictions says where the declarations of the endpoints, or of the
// one labelled label when it is not "", contradict what arrived through
// them.
func (d *dashboard) contradictions(ctx context.Context, label string) ([]string, error) {
	eps := d.opts.Endpoints
	if label != "" {
		ep, err := endpoint.Find(eps, label)
		if err != nil {
			return nil, nil
		}
		eps = []endpoint.Endpoint{ep}
	}
	if !slices.ContainsFunc(eps, func(e endpoint.Endpoint) bool { return !e.Undeclared }) {
		return nil, nil
	}
	arrived, err := d.reads.EndpointsArrived(ctx, endpoint.ArrivedWindow)
	if err != nil {
		return nil, err
	}
	return endpoint.AllContradictions(eps, arrived), nil
}

// findEvent says where the Stripe event eventID is: on the queue, processed
// (it has a dedup marker), or unknown.
func (d *dashboard) findEvent(ctx context.Context, eventID string) (*views.SearchResult, error) {
	loc, err := d.reads.Locate(ctx, eventID)
	if err != nil {
		return nil, err
	}
	return &views.SearchResult{EventID: eventID, Queued: loc.Queued, Processed: loc.Queued == nil && loc.ProcessedAt != nil}, nil
}

// eventID parses the :id of the path; a malformed one is as unknown as a
// missing one.
func eventID(c echo.Context) (uuid.UUID, error) {
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		return uuid.Nil, queue.ErrNotFound
	}
	return id, nil
}

func (d *dashboard) handleEvent() echo.HandlerFunc {
	return func(c echo.Context) error {
		detail, err := d.eventDetail(c)
		if err != nil {
			return err
		}
		return d.renderEvent(c, http.StatusOK, detail)
	}
}

// eventDetail reads everything the event's page shows.
func (d *dashboard) eventDetail(c echo.Context) (views.EventDetail, error) {
	ctx := c.Request().Context()
	id, err := eventID(c)
	if err != nil {
		return views.EventDetail{}, err
	}
	e, err := d.reads.Event(ctx, id)
	if err != nil {
		return views.EventDetail{}, err
	}
	attempts, err := d.reads.Attempts(ctx, e.Source, e.EventID)
	if err != nil {
		return views.EventDetail{}, err
	}
	inFlight, err := d.reads.EventInFlight(ctx, e.EventID)
	if err != nil {
		return views.EventDetail{}, err
	}
	// Indented for reading; shown as received when it is not JSON.
	payload := e.Payload
	var buf bytes.Buffer
	if json.Indent(&buf, []byte(e.Payload), "", "  ") == nil {
		payload = buf.String()
	}
	canPull := d.opts.Reconciler != nil
	// After an action the person lands on Find an event, not back here:
	// the retry loop may process the event, and delete this queue row,
	// before the browser follows the redirect, and the search follows
	// the event wherever it went.
	detail := views.EventDetail{Event: e, Payload: payload, Attempts: attempts, OverdueAfter: queue.OverdueAfter,
		InFlight: inFlight, Back: "/search?q=" + url.QueryEscape(e.EventID),
		CanPull: canPull && (e.Account == nil || d.opts.Reconciler.PullsConnect())}
	if ref, _, ok := stripeapi.EventObject([]byte(e.Payload)); ok {
		detail.Stripe = views.StripeNow{Configured: d.opts.Stripe != nil, Object: ref.String()}
	}
	switch pair, err := d.reads.PairOf(ctx, e.EventID); {
	case err == nil:
		detail.Pair = &pair
	case !errors.Is(err, queue.ErrNotFound):
		return views.EventDetail{}, err
	}
	if detail.Replays, err = d.reads.ReplaysOfEvent(ctx, e.EventID); err != nil {
		return views.EventDetail{}, err
	}
	if e.Source == queue.SourceStripe {
		// The event log's flag, as Find an event shows it.
		switch entry, err := d.reads.LogEntry(ctx, e.EventID); {
		case err == nil:
			detail.OutOfOrder = entry.OutOfOrder
		case !errors.Is(err, queue.ErrNotFound):
			return views.EventDetail{}, err
		}
	}
	return detail, nil
}

func (d *dashboard) renderEvent(c echo.Context, status int, detail views.EventDetail) error {
	nav := "pending"
	if detail.Event.Status == queue.StatusDead {
		nav = "dead"
	}
	delivery := d.opts.Control.State()
	if detail.Event.Status != queue.StatusDead {
		var err error
		if detail.Wait, err = d.dueWait(c.Request().Context(), delivery); err != nil {
			return err
		}
	}
	return render(c, status, views.EventDetailPage(d.pageWith(c, detail.Event.EventID, nav, delivery), detail))
}

// dueWait says what explains that due events wait, for the stuck rule:
// delivery, as the page's banner shows it, or a retry loop working through
// the queue (queue.DueWaitOf).
func (d *dashboard) dueWait(ctx context.Context, delivery queue.DeliveryControl) (queue.DueWait, error) {
	ws, err := d.reads.WorkerStatus(ctx)
	if err != nil {
		return queue.WaitUnexplained, err
	}
	return queue.DueWaitOf(delivery, ws), nil
}

// retryOne sends one event back for a retry with act, in one transaction
// with its audit entry, and returns to the page the button was on. act
// says what it did, for the flash after the event id, or "" when it did
// nothing because the event was not in the state the action needs, which
// notApplicable then says.
func (d *dashboard) retryOne(c echo.Context, action audit.Action,
	act func(context.Context, *queue.Tx, uuid.UUID) (string, error), notApplicable string) error {
	ctx := c.Request().Context()
	id, err := eventID(c)
	if err != nil {
		return err
	}
	var e queue.Event
	var done string
	err = d.store.InTx(ctx, func(tx *queue.Tx) error {
		var err error
		if e, err = tx.Event(ctx, id); err != nil {
			return err
		}
		if done, err = act(ctx, tx, id); err != nil || done == "" {
			return err
		}
		return audit.Record(ctx, tx.PgxTx(), currentUser(c).Email, action, e.EventID, 1)
	})
	if errors.Is(err, queue.ErrPayloadErased) {
		flash(c, views.ErasedRetryRefusal(e))
		return c.Redirect(http.StatusSeeOther, "/events/"+id.String())
	}
	if err != nil {
		return err
	}
	if done != "" {
		flash(c, e.EventID+" "+done)
	} else {
		flash(c, e.EventID+" "+notApplicable+"; nothing was changed.")
	}
	return c.Redirect(http.StatusSeeOther, localPath(c.FormValue("back"), "/events/"+id.String()))
}

func (d *dashboard) handleRetry() echo.HandlerFunc {
	return func(c echo.Context) error {
		return d.retryOne(c, audit.Retry, func(ctx context.Context, tx *queue.Tx, id uuid.UUID) (string, error) {
			if ok, err := tx.RetryDead(ctx, id); err != nil || !ok {
				return "", err
			}
			return "queued for retry", nil
		}, "is not dead any more")
	}
}

func (d *dashboard) handleRetryNow() echo.HandlerFunc {
	return func(c echo.Context) error {
		return d.retryOne(c, audit.RetryNow, func(ctx context.Context, tx *queue.Tx, id uuid.UUID) (string, error) {
			h, err := tx.RetryNow(ctx, id)
			return views.HasteningText(h), err
		}, "is not pending any more")
	}
}

func (d *dashboard) handleRetryAllPreview() echo.HandlerFunc {
	return func(c echo.Context) error {
		f := listFilter(c, queue.StatusDead)
		n, err := d.reads.CountEvents(c.Request().Context(), f)
		if err != nil {
			return err
		}
		p := d.page(c, "Retry all?", "dead")
		return render(c, http.StatusOK, views.RetryAllConfirm(p, f, n, listURL(f, 1)))
	}
}

func (d *dashboard) handleRetryAll() echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		f := listFilter(c, queue.StatusDead)
		var r queue.RetriedDead
		err := d.store.InTx(ctx, func(tx *queue.Tx) error {
			var err error
			if r, err = tx.RetryDeadMatching(ctx, f); err != nil {
				return err
			}
			return audit.Record(ctx, tx.PgxTx(), currentUser(c).Email, audit.RetryAll, filterText(f), r.Queued)
		})
		if err != nil {
			return err
		}
		flash(c, views.RetriedDeadText(r))
		return c.Redirect(http.StatusSeeOther, listURL(f, 1))
	}
}

// filterText records a bulk retry's filter in the audit log.
func filterText(f queue.EventFilter) string {
	if filter := views.DescribeFilter(f); filter != "" {
		return "dead events with " + filter
	}
	return "all dead events"
}

// auditRows is what the audit page shows of entries.
func auditRows(entries []audit.Entry) []views.AuditRow {
	rows := make([]views.AuditRow, len(entries))
	for i, e := range entries {
		rows[i] = views.AuditRow{At: e.At, Email: e.Email, Action: e.Action, Target: e.Target, Count: e.Count}
	}
	return rows
}

func (d *dashboard) handleAudit() echo.HandlerFunc {
	return func(c echo.Context) error {
		pageNum := pageParam(c)
		page, err := d.audit.Read(c.Request().Context(), perPage, (pageNum-1)*perPage)
		if err != nil {
			return err
		}
		l := views.AuditList{Entries: auditRows(page.Entries), Total: page.Total, PageNum: pageNum, PerPage: perPage}
		if pageNum > 1 {
			l.Prev = "/audit?page=" + strconv.Itoa(pageNum-1)
		}
		if int64(pageNum*perPage) < page.Total {
			l.Next = "/audit?page=" + strconv.Itoa(pageNum+1)
		}
		return render(c, http.StatusOK, views.Audit(d.page(c, "Audit log", "audit"), l))
	}
}
