package web

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/actions"
)

// objectPrefixes are the Stripe id prefixes the search box reads as an
// object or a customer, whose history it shows from the event log, rather
// than as one event.
var objectPrefixes = []string{"cus_", "in_", "il_", "sub_", "si_", "pi_", "ch_", "py_", "re_", "dp_", "du_", "cs_",
	"seti_", "pm_", "src_", "card_", "ba_", "po_", "tr_", "txn_", "prod_", "price_", "plink_", "acct_", "ii_", "cn_",
	"sched_", "mbur_", "tax_", "txr_", "ipi_", "iauth_", "ic_", "ich_", "quote_", "promo_"}

// isObjectID says whether q is an object or customer id for the history.
func isObjectID(q string) bool {
	for _, p := range objectPrefixes {
		if strings.HasPrefix(q, p) && len(q) > len(p) {
			return true
		}
	}
	return false
}

// handleErase erases the event log's payloads of every event about a
// customer, for a GDPR request, and audits it; the history page offers it
// to admins.
func (d *dashboard) handleErase() echo.HandlerFunc {
	return func(c echo.Context) error {
		customer := strings.TrimSpace(c.FormValue("customer"))
		erased, err := d.actions.Erase(c.Request().Context(), d.actor(c), customer)
		var invalid *actions.InvalidError
		if errors.As(err, &invalid) {
			return echo.NewHTTPError(http.StatusBadRequest, invalid.Detail)
		}
		if err != nil {
			return err
		}
		s := erased.Summary(customer)
		flash(c, strings.ToUpper(s[:1])+s[1:]+".")
		return c.Redirect(http.StatusSeeOther, "/search?"+url.Values{"q": {customer}}.Encode())
	}
}
