package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views"
)

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
		Destination:   strings.TrimSpace(c.FormValue("destination")),
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
		"group": f.ErrorGroup, "endpoint": f.Endpoint, "mode": views.ModeValue(f.Livemode), "account": f.Account,
		"destination": f.Destination} {
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
		if l.Destinations, err = d.reads.DestinationNames(ctx); err != nil {
			return err
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
	list, err := d.actions.ListEvents(ctx, f, "")
	if err != nil {
		return views.EventList{}, err
	}
	f.Wait = list.Wait
	page := queue.EventPage{Events: list.Events, Total: list.Total}
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
