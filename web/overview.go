package web

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/internal/store/reconcileruns"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views"
	"github.com/hookd/hookd/worker"
)

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
	return strconv.Itoa(max(actions.MinPruneDays, int(d.opts.MarkerRetention/(24*time.Hour))))
}

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
