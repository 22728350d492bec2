package web

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/views"
)

// auditRows is what the audit page shows of entries.
func auditRows(entries []audit.Entry) []views.AuditRow {
	rows := make([]views.AuditRow, len(entries))
	for i, e := range entries {
		rows[i] = views.AuditRow{At: e.At, Email: e.Email, Account: e.Account().String(), Token: e.Token(), Action: e.Action, Target: e.Target, Count: e.Count}
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
