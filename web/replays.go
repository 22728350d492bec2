package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views"
)

// handleReplays lists the replays and, for operators, the form of a new
// one, its time range the last day.
func (d *dashboard) handleReplays() echo.HandlerFunc {
	return func(c echo.Context) error {
		now := time.Now().UTC()
		form := views.ReplayForm{From: now.Add(-24 * time.Hour).Format(views.ReplayFormTime),
			To: now.Add(time.Minute).Format(views.ReplayFormTime), Processed: true}
		return d.renderReplays(c, http.StatusOK, form)
	}
}

func (d *dashboard) renderReplays(c echo.Context, status int, form views.ReplayForm) error {
	rs, err := d.actions.Replays(c.Request().Context(), "", queue.MaxReplaysListed)
	if err != nil {
		return err
	}
	if form.Destinations, err = d.reads.DestinationNames(c.Request().Context()); err != nil {
		return err
	}
	return render(c, status, views.Replays(d.page(c, "Replays", "replays"), views.ReplaysPage{Replays: rs.Replays, Form: form}))
}

// replayForm reads a replay's filter from the form, and says what is
// wrong with it.
func replayForm(c echo.Context) (views.ReplayForm, queue.ReplayFilter, error) {
	form := views.ReplayForm{
		From: strings.TrimSpace(c.FormValue("from")), To: strings.TrimSpace(c.FormValue("to")),
		Types: strings.TrimSpace(c.FormValue("types")), Endpoint: strings.TrimSpace(c.FormValue("endpoint")),
		Object: strings.TrimSpace(c.FormValue("object")), Name: strings.TrimSpace(c.FormValue("name")),
		Destination: strings.TrimSpace(c.FormValue("destination")),
	}
	values, err := c.FormParams()
	if err != nil {
		return form, queue.ReplayFilter{}, err
	}
	for _, s := range values["status"] {
		switch s {
		case "processed":
			form.Processed = true
		case "pending":
			form.Pending = true
		case "dead":
			form.Dead = true
		default:
			return form, queue.ReplayFilter{}, fmt.Errorf("%q is not a status: processed, pending or dead", s)
		}
	}
	f := queue.ReplayFilter{Endpoint: form.Endpoint, Object: form.Object,
		Processed: form.Processed, Pending: form.Pending, Dead: form.Dead, Destination: form.Destination}
	for _, field := range []struct {
		raw string
		t   *time.Time
	}{{form.From, &f.From}, {form.To, &f.To}} {
		if field.raw == "" {
			continue
		}
		if *field.t, err = parseFormTime(field.raw); err != nil {
			return form, queue.ReplayFilter{}, fmt.Errorf("%q is not a time: give it as 2026-01-31T14:00 (UTC)", field.raw)
		}
	}
	f.Types = strings.FieldsFunc(form.Types, func(r rune) bool { return r == ',' || r == ' ' })
	if err := f.Check(); err != nil {
		return form, queue.ReplayFilter{}, err
	}
	return form, f, nil
}

// parseFormTime reads a datetime-local input's value (with or without
// seconds) or an RFC 3339 time, in UTC.
func parseFormTime(raw string) (time.Time, error) {
	for _, layout := range []string{views.ReplayFormTime, views.ReplayFormTime + ":05", time.RFC3339} {
		if t, err := time.ParseInLocation(layout, raw, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("not a time")
}

// handleReplayPreview shows how many events a replay of the filter would
// deliver, how many it must skip, and a few of them, and asks for its name.
func (d *dashboard) handleReplayPreview() echo.HandlerFunc {
	return func(c echo.Context) error {
		form, f, err := replayForm(c)
		if err != nil {
			form.Problem = "Nothing previewed: " + err.Error() + "."
			return d.renderReplays(c, http.StatusBadRequest, form)
		}
		preview, err := d.actions.PreviewReplay(c.Request().Context(), f)
		if invalid, ok := errors.AsType[*actions.InvalidError](err); ok {
			form.Problem = invalid.Detail
			return d.renderReplays(c, http.StatusBadRequest, form)
		}
		if err != nil {
			return err
		}
		return render(c, http.StatusOK, views.ReplayPreview(d.page(c, "Replay events?", "replays"),
			views.ReplayPreviewPage{Form: form, Filter: f, Preview: preview}))
	}
}

// handleStartReplay starts a named replay of the filter
// (actions.StartReplay) and shows its progress.
func (d *dashboard) handleStartReplay() echo.HandlerFunc {
	return func(c echo.Context) error {
		form, f, err := replayForm(c)
		if err != nil {
			return echo.NewHTTPError(http.StatusBadRequest, "Nothing started: "+err.Error()+".")
		}
		r, err := d.actions.StartReplay(c.Request().Context(), d.actor(c), form.Name, f)
		var invalid *actions.InvalidError
		switch {
		case errors.As(err, &invalid):
			return echo.NewHTTPError(http.StatusBadRequest, invalid.Detail)
		case errors.Is(err, queue.ErrNothingToReplay):
			return echo.NewHTTPError(http.StatusBadRequest, "Nothing started: "+err.Error()+".")
		case err != nil:
			return err
		}
		flash(c, fmt.Sprintf("Replay “%s” started: %s to deliver.", r.Name, views.Plural(r.Total, "event", "events")))
		return c.Redirect(http.StatusSeeOther, "/replays/"+strconv.FormatInt(r.ID, 10))
	}
}

// replayID reads the :id of a replay's route.
func replayID(c echo.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, echo.NewHTTPError(http.StatusNotFound, "No such replay: a replay's id is a number, as in /replays/12.")
	}
	return id, nil
}

// replayPage reads a replay for its page, or a 404 saying so.
func (d *dashboard) replayPage(c echo.Context) (views.ReplayPage, error) {
	id, err := replayID(c)
	if err != nil {
		return views.ReplayPage{}, err
	}
	r, err := d.actions.Replay(c.Request().Context(), id)
	if errors.Is(err, actions.ErrNoReplay) {
		return views.ReplayPage{}, echo.NewHTTPError(http.StatusNotFound, "No such replay: it may have been pruned with the events it replayed.")
	}
	if err != nil {
		return views.ReplayPage{}, err
	}
	return views.ReplayPage{Replay: r, Rate: d.opts.Pace.PerSecond()}, nil
}

// handleReplay is a replay's page: its progress, Cancel, and its failed
// deliveries.
func (d *dashboard) handleReplay() echo.HandlerFunc {
	return func(c echo.Context) error {
		s, err := d.replayPage(c)
		if err != nil {
			return err
		}
		if s.Replay.Failed > 0 {
			if s.Failed, err = d.reads.FailedMembers(c.Request().Context(), s.Replay.ID); err != nil {
				return err
			}
		}
		return render(c, http.StatusOK, views.ReplayDetail(d.page(c, "Replay "+s.Replay.Name, "replays"), s))
	}
}

// handleReplayProgress renders a replay's progress alone, for htmx.
func (d *dashboard) handleReplayProgress() echo.HandlerFunc {
	return func(c echo.Context) error {
		s, err := d.replayPage(c)
		if err != nil {
			return err
		}
		noStore(c)
		return render(c, http.StatusOK, views.ReplayProgress(d.page(c, "", "replays"), s))
	}
}

// handleCancelReplay cancels a running replay, audited: this replica's
// runner starts no delivery of it from the commit on, the others' within
// a second.
func (d *dashboard) handleCancelReplay() echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		id, err := replayID(c)
		if err != nil {
			return err
		}
		r, err := d.actions.CancelReplay(ctx, d.actor(c), id)
		switch {
		case errors.Is(err, queue.ErrNotFound):
			return echo.NewHTTPError(http.StatusNotFound, "No such replay: it may have been pruned with the events it replayed.")
		case errors.Is(err, queue.ErrReplayNotRunning):
			flash(c, "The replay had ended already.")
		case err != nil:
			return err
		default:
			flash(c, fmt.Sprintf("Replay “%s” cancelled: %s not delivered.", r.Name, views.Plural(r.Remaining(), "event", "events")))
		}
		return c.Redirect(http.StatusSeeOther, "/replays/"+strconv.FormatInt(id, 10))
	}
}
