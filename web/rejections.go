package web

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/internal/receiver"
	"github.com/hookd/hookd/internal/store/rejections"
	"github.com/hookd/hookd/views"
)

// rejectionsURL is the URL of one page of the rejection log under f.
func rejectionsURL(f rejections.Filter, page int) string {
	q := url.Values{}
	if f.Reason != "" {
		q.Set("reason", string(f.Reason))
	}
	if f.ClaimedEventID != "" {
		q.Set("q", f.ClaimedEventID)
	}
	if page > 1 {
		q.Set("page", strconv.Itoa(page))
	}
	if len(q) == 0 {
		return "/rejections"
	}
	return "/rejections?" + q.Encode()
}

func (d *dashboard) handleRejections() echo.HandlerFunc {
	return func(c echo.Context) error {
		f := rejections.Filter{
			Reason:         rejections.Reason(c.QueryParam("reason")),
			ClaimedEventID: strings.TrimSpace(c.QueryParam("q")),
		}
		pageNum := pageParam(c)
		f.Limit, f.Offset = perPage, (pageNum-1)*perPage
		read, err := d.actions.Rejections(c.Request().Context(), f, "")
		var invalid *actions.InvalidError
		if errors.As(err, &invalid) {
			return echo.NewHTTPError(http.StatusBadRequest, invalid.Detail)
		}
		if err != nil {
			return err
		}
		page := read.Page
		l := views.RejectionList{Filter: f, Page: page, PageNum: pageNum, PerPage: perPage,
			RetentionDays: max(1, int(d.opts.MarkerRetention.Hours()/24)), Tolerance: receiver.SignatureTolerance}
		if pageNum > 1 {
			l.Prev = rejectionsURL(f, pageNum-1)
		}
		if int64(f.Offset+len(page.Rejections)) < page.Total {
			l.Next = rejectionsURL(f, pageNum+1)
		}
		return render(c, http.StatusOK, views.Rejections(d.page(c, "Refused deliveries", "rejections"), l))
	}
}
