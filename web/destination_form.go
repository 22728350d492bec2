package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/actions"
	"github.com/hookd/hookd/internal/destinations"
	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/views"
)

// The pages that add, edit and remove a destination managed on the
// dashboard, for admins: read-only while HOOKD_DESTINATIONS_FILE is set.
// Each change runs in one transaction with its audit entry
// (internal/actions); signing secrets and headers are write-only.

// afterRemoval is where a removal leads: the destinations page, where a
// retired destination's deliveries are moved or dropped.
const afterRemoval = "/destinations"

// renderDestinationForm renders the add or edit form f, with what the
// configuration says of it filled in.
func (d *dashboard) renderDestinationForm(c echo.Context, status int, f views.DestinationForm) error {
	cfg := d.actions.DestinationsConfig()
	f.ReadOnly, f.KeySet = cfg.File, len(cfg.Key) > 0
	title := "Add a destination"
	if f.Editing {
		title = "Edit destination " + f.Name
	}
	return render(c, status, views.DestinationFormPage(d.page(c, title, "destinations"), f))
}

func (d *dashboard) handleAddDestinationPage() echo.HandlerFunc {
	return func(c echo.Context) error {
		return d.renderDestinationForm(c, http.StatusOK, views.DestinationForm{})
	}
}

func (d *dashboard) handleAddDestination() echo.HandlerFunc {
	return func(c echo.Context) error {
		form := destinationFormOf(c, views.DestinationForm{Name: strings.TrimSpace(c.FormValue("name"))})
		e, err := destinationEntryOf(c, form.Name)
		if err == nil {
			_, err = d.actions.AddDestination(c.Request().Context(), d.actor(c), e)
		}
		if err != nil {
			return d.destinationRefused(c, form, "Not added", err)
		}
		flash(c, "Added destination "+form.Name+". Every replica delivers to it once it reloads its destinations.")
		return c.Redirect(http.StatusSeeOther, "/destinations/"+url.PathEscape(form.Name)+"/edit")
	}
}

// destinationRefused renders the form again, saying why the change was
// refused, for the refusals a person can act on; any other error is
// returned as it is.
func (d *dashboard) destinationRefused(c echo.Context, form views.DestinationForm, what string, err error) error {
	var (
		invalid *actions.InvalidError
		refused *actions.DestinationRefusedError
	)
	switch {
	case errors.As(err, &invalid):
		form.Error, form.ErrorField = what+": "+invalid.Detail, invalid.Field
		if strings.TrimSpace(c.FormValue("signing_secrets")+c.FormValue("headers")) != "" {
			form.Error += " Signing secrets and headers are never sent back: type them again."
		}
		return d.renderDestinationForm(c, http.StatusUnprocessableEntity, form)
	case errors.As(err, &refused):
		form.Error = what + ": " + refused.Reason + "."
		return d.renderDestinationForm(c, http.StatusConflict, form)
	case errors.Is(err, actions.ErrDestinationsFromFile):
		return d.renderDestinationForm(c, http.StatusConflict, form)
	case errors.Is(err, queue.ErrNotFound):
		return d.noSuchDestination(c, form.Name)
	}
	return err
}

func (d *dashboard) noSuchDestination(c echo.Context, name string) error {
	p := d.page(c, "No such destination", "destinations")
	p.Error = fmt.Sprintf("There is no destination %s; it may have been removed. Nothing was changed.", name)
	return render(c, http.StatusNotFound, views.DestinationFormPage(p, views.DestinationForm{
		ReadOnly: d.actions.DestinationsConfig().File, KeySet: len(d.actions.DestinationsConfig().Key) > 0}))
}

// destinationFormOf is the form as typed, without its secrets and
// headers, which are never sent back.
func destinationFormOf(c echo.Context, f views.DestinationForm) views.DestinationForm {
	f.URL = strings.TrimSpace(c.FormValue("url"))
	f.Types, f.Accounts, f.Endpoints = c.FormValue("types"), c.FormValue("accounts"), c.FormValue("endpoints")
	f.Livemode, f.Filter = c.FormValue("livemode"), strings.TrimSpace(c.FormValue("filter"))
	f.Concurrency, f.Timeout = strings.TrimSpace(c.FormValue("concurrency")), strings.TrimSpace(c.FormValue("timeout"))
	f.Rate, f.OrderBy = strings.TrimSpace(c.FormValue("rate")), strings.TrimSpace(c.FormValue("order_by"))
	return f
}

// destinationEntryOf reads destination name's form: the lists separated
// by commas or spaces (empty: the default), the signing secrets by
// whitespace, the headers one "Name: value" a line. What the form cannot
// read is refused naming the field, as the destination's own checks do.
func destinationEntryOf(c echo.Context, name string) (destinations.Entry, error) {
	e := destinations.Entry{Name: name, URL: strings.TrimSpace(c.FormValue("url")),
		Types: listOf(c.FormValue("types")), Livemode: c.FormValue("livemode"), Accounts: listOf(c.FormValue("accounts")),
		Endpoints: listOf(c.FormValue("endpoints")), Filter: strings.TrimSpace(c.FormValue("filter")),
		Timeout: strings.TrimSpace(c.FormValue("timeout")), OrderBy: strings.TrimSpace(c.FormValue("order_by")),
		SigningSecrets: strings.Fields(c.FormValue("signing_secrets"))}
	if v := strings.TrimSpace(c.FormValue("concurrency")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return e, &actions.InvalidError{Field: "concurrency",
				Detail: fmt.Sprintf("destination %q: concurrency: %q is not a whole number.", name, v)}
		}
		e.Concurrency = n
	}
	if v := strings.TrimSpace(c.FormValue("rate")); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return e, &actions.InvalidError{Field: "rate",
				Detail: fmt.Sprintf("destination %q: rate: %q is not a number of calls a second, like 20 or 0.5.", name, v)}
		}
		e.Rate = r
	}
	var err error
	e.Headers, err = headersOf(name, c.FormValue("headers"))
	return e, err
}

// rateText is a rate as the form shows it: "" for none.
func rateText(r float64) string {
	if r <= 0 {
		return ""
	}
	return strconv.FormatFloat(r, 'g', -1, 64)
}

// listOf splits a list typed with commas or spaces; nil when empty.
func listOf(v string) []string {
	items := strings.FieldsFunc(v, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	if len(items) == 0 {
		return nil
	}
	return items
}

// headersOf reads one "Name: value" a line; blank lines are skipped.
func headersOf(name, v string) (map[string]string, error) {
	var out map[string]string
	for i, line := range strings.Split(v, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, val, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, &actions.InvalidError{Field: "headers",
				Detail: fmt.Sprintf("destination %q: headers: line %d is not Name: value.", name, i+1)}
		}
		if out == nil {
			out = map[string]string{}
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(val)
	}
	return out, nil
}

// managedForm is the edit form of m, as kept.
func managedForm(m queue.ManagedDestination) views.DestinationForm {
	e := m.Entry()
	f := views.DestinationForm{Editing: true, Name: m.Name, URL: m.URL, Types: strings.Join(e.Types, ", "),
		Livemode: e.Livemode, Accounts: strings.Join(e.Accounts, ", "), Endpoints: strings.Join(e.Endpoints, ", "),
		Filter: e.Filter, Timeout: e.Timeout, Rate: rateText(e.Rate), OrderBy: e.OrderBy, SecretsSet: m.SigningSecretsSet,
		HeadersSet: m.HeadersSet, UpdatedAt: m.UpdatedAt}
	if e.Concurrency > 0 {
		f.Concurrency = strconv.Itoa(e.Concurrency)
	}
	if m.UpdatedBy != nil {
		f.UpdatedBy = *m.UpdatedBy
	}
	return f
}

// managedDestination reads the destination of the path's :name, the
// dashboard's and not retired; ok false with the answer rendered when it
// is not one the forms change.
func (d *dashboard) managedDestination(c echo.Context) (m queue.ManagedDestination, ok bool, err error) {
	name := c.Param("name")
	m, err = d.actions.ManagedDestination(c.Request().Context(), name)
	if errors.Is(err, queue.ErrNotFound) {
		return m, false, d.noSuchDestination(c, name)
	}
	if err != nil {
		return m, false, err
	}
	if m.Source != destinations.SourceDashboard || m.RetiredAt != nil {
		p := d.page(c, "Destination "+name, "destinations")
		p.Error = notManagedHere(m)
		return m, false, render(c, http.StatusConflict, views.DestinationFormPage(p, views.DestinationForm{
			ReadOnly: d.actions.DestinationsConfig().File, KeySet: len(d.actions.DestinationsConfig().Key) > 0,
			Editing: true, Name: name}))
	}
	return m, true, nil
}

// notManagedHere says why destination m is not changed on these pages.
func notManagedHere(m queue.ManagedDestination) string {
	switch {
	case m.Source == destinations.SourceForwardURL:
		return m.Name + " is HOOKD_FORWARD_URL's destination: it is changed in hookd's environment, not here."
	case m.Source == destinations.SourceFile:
		return m.Name + " comes from a destinations file: it is changed there."
	}
	return m.Name + " is retired: it gets no new events. Add a destination of the same name to configure it anew."
}

func (d *dashboard) handleEditDestinationPage() echo.HandlerFunc {
	return func(c echo.Context) error {
		if d.actions.DestinationsConfig().File != "" {
			return d.renderDestinationForm(c, http.StatusOK, views.DestinationForm{Editing: true, Name: c.Param("name")})
		}
		m, ok, err := d.managedDestination(c)
		if !ok {
			return err
		}
		return d.renderDestinationForm(c, http.StatusOK, managedForm(m))
	}
}

func (d *dashboard) handleEditDestination() echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		name := c.Param("name")
		form := destinationFormOf(c, views.DestinationForm{Editing: true, Name: name})
		if m, err := d.actions.ManagedDestination(ctx, name); err == nil {
			form.SecretsSet, form.HeadersSet = m.SigningSecretsSet, m.HeadersSet
		}
		e, err := destinationEntryOf(c, name)
		var change actions.DestinationChange
		if err == nil {
			edit := actions.DestinationEdit{Entry: e,
				ReplaceSecrets: len(e.SigningSecrets) > 0 || c.FormValue("remove_signing_secrets") != "",
				ReplaceHeaders: len(e.Headers) > 0 || c.FormValue("remove_headers") != ""}
			change, err = d.actions.EditDestination(ctx, d.actor(c), edit)
		}
		if err != nil {
			return d.destinationRefused(c, form, "Not saved", err)
		}
		if len(change.Changed) == 0 {
			flash(c, "Nothing was changed: "+name+" already had these settings.")
		} else {
			flash(c, fmt.Sprintf("Saved %s: %s changed. Every replica delivers with them once it reloads its destinations.",
				name, strings.Join(change.Changed, ", ")))
		}
		return c.Redirect(http.StatusSeeOther, "/destinations/"+url.PathEscape(name)+"/edit")
	}
}

// handleRemoveDestinationPreview asks before a removal, saying whether
// the destination will be kept retired; what happens is decided when it
// does, on the locked row.
func (d *dashboard) handleRemoveDestinationPreview() echo.HandlerFunc {
	return func(c echo.Context) error {
		return d.removeDestination(c, true)
	}
}

func (d *dashboard) handleRemoveDestination() echo.HandlerFunc {
	return func(c echo.Context) error {
		return d.removeDestination(c, false)
	}
}

// removeDestination removes the path's destination, or asks before it
// (dryRun).
func (d *dashboard) removeDestination(c echo.Context, dryRun bool) error {
	if d.actions.DestinationsConfig().File != "" {
		return d.destinationRefused(c, views.DestinationForm{}, "Not removed", actions.ErrDestinationsFromFile)
	}
	m, ok, err := d.managedDestination(c)
	if !ok {
		return err
	}
	r, err := d.actions.RemoveDestination(c.Request().Context(), d.actor(c), m.Name, dryRun)
	if err != nil {
		return d.destinationRefused(c, managedForm(m), "Not removed", err)
	}
	switch {
	case dryRun:
		display := (&destinations.Destination{URL: m.URL}).DisplayURL()
		return render(c, http.StatusOK, views.DestinationRemoveConfirm(d.page(c, "Remove destination?", "destinations"),
			views.DestinationRemoval{Name: m.Name, URL: display, Waiting: r.Waiting}))
	case r.Retired:
		flash(c, fmt.Sprintf("Removed %s. It is kept as retired while %d deliveries to it wait: move them to another "+
			"destination or drop them.", m.Name, r.Waiting))
	default:
		flash(c, "Removed "+m.Name+". Nothing to it was waiting, so it is gone.")
	}
	return c.Redirect(http.StatusSeeOther, afterRemoval)
}
