package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/hookd/hookd/web/api/apiclient"
)

// EventsUsage is `hookd events`' usage.
const EventsUsage = `usage: hookd events list [--status dead|pending|failed|retrying] [--type T] [--error TEXT] [--limit N] [--cursor C] [--json]
       hookd events show ID [--json]
       hookd events retry ID... [--json]`

// Events is `hookd events`: list the queue's events, show one, retry dead
// ones.
func Events(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return dispatch(ctx, "events", EventsUsage, map[string]command{
		"list": eventsList, "show": eventsShow, "retry": eventsRetry,
	}, args, getenv, stdout, stderr)
}

func eventsList(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flagSet("events list", "List the events on hookd's queue: dead ones newest first, pending ones as they are due.", stderr)
	status := fs.String("status", "dead", "which list: dead, pending (failed and retrying), failed or retrying")
	eventType := fs.String("type", "", "only events of exactly this type, e.g. invoice.paid")
	errorText := fs.String("error", "", "only events whose last error contains this text")
	group := fs.String("group", "", "only events of this failure group (its error, as hookd failures list --json has it)")
	id := fs.String("id", "", "only the event with this Stripe id (evt_...)")
	limit := fs.Int("limit", 50, "at most this many events (1 to 200)")
	cursor := fs.String("cursor", "", "the page after a previous list's (its next cursor)")
	asJSON := fs.Bool("json", false, "print the API's JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	c, err := NewClient(getenv)
	if err != nil {
		return err
	}
	st := apiclient.ListEventsParamsStatus(*status)
	p := &apiclient.ListEventsParams{Status: &st, Limit: limit, Type: opt(*eventType), Error: opt(*errorText),
		Group: opt(*group), Q: opt(*id), Cursor: opt(*cursor)}
	body, err := c.read(c.api.ListEvents(ctx, p))
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, body)
	}
	var list apiclient.EventList
	if err := decode(body, &list); err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tTYPE\tSTATUS\tATTEMPTS\tRECEIVED\tNEXT ATTEMPT\tLAST ERROR")
	for _, e := range list.Events {
		next := when(&e.NextRetryAt, "")
		if e.Status == apiclient.EventStatusDead {
			next = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", e.Id, e.Type, e.Status, e.Attempts, when(&e.CreatedAt, ""), next,
			clip(deref(e.LastError), 70))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%d of %d %s events\n", len(list.Events), list.Total, *status)
	if list.NextCursor != nil {
		fmt.Fprintf(stderr, "next page: hookd events list --status %s --cursor %s (with the same filter)\n", *status, *list.NextCursor)
	}
	return nil
}

func eventsShow(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flagSet("events show ID", "Show an event on hookd's queue, by its Stripe id (evt_...), with its attempts and payload.", stderr)
	asJSON := fs.Bool("json", false, "print the API's JSON")
	ids, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	c, err := NewClient(getenv)
	if err != nil {
		return err
	}
	body, err := c.read(c.api.GetEvent(ctx, ids[0]))
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, body)
	}
	var e apiclient.EventDetail
	if err := decode(body, &e); err != nil {
		return err
	}
	return printEvent(stdout, e)
}

func printEvent(stdout io.Writer, e apiclient.EventDetail) error {
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	status := string(e.Status)
	if e.PayloadErased {
		status += " (payload erased)"
	}
	for _, row := range [][2]string{
		{"ID", e.Id}, {"Queue id", e.QueueId.String()}, {"Type", e.Type}, {"Status", status},
		{"Attempts", strconv.Itoa(e.Attempts)}, {"Received", when(&e.CreatedAt, "")},
		{"Last attempt", when(e.LastAttemptAt, "never")}, {"Next attempt", when(&e.NextRetryAt, "")},
		{"Endpoint", e.Endpoint}, {"Account", deref(e.Account)}, {"Last error", deref(e.LastError)},
	} {
		fmt.Fprintf(w, "%s\t%s\n", row[0], row[1])
	}
	if len(e.AttemptsMade) > 0 {
		fmt.Fprintln(w, "\nATTEMPTED\tPATH\tNUMBER\tOUTCOME\tHTTP\tMS\tERROR")
		for _, a := range e.AttemptsMade {
			httpStatus := "-"
			if a.HttpStatus != nil {
				httpStatus = strconv.Itoa(*a.HttpStatus)
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%.0f\t%s\n", when(&a.AttemptedAt, ""), a.Path, a.Number, a.Outcome, httpStatus,
				a.DurationMs, clip(deref(a.Error), 70))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if e.Payload != "" {
		fmt.Fprintf(stdout, "\nPayload\n%s\n", e.Payload)
	}
	return nil
}

func eventsRetry(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flagSet("events retry ID...", "Send dead events back to hookd's queue, due at once, their attempts starting over.", stderr)
	asJSON := fs.Bool("json", false, "print a JSON array of the API's answers, one per event retried")
	ids, err := parse(fs, args, 1, -1)
	if err != nil {
		return err
	}
	c, err := NewClient(getenv)
	if err != nil {
		return err
	}
	answers := []json.RawMessage{}
	var first *Error
	refused := 0
	for _, id := range ids {
		body, err := c.read(c.api.RetryEvent(ctx, id, nil))
		var ce *Error
		switch {
		case errors.As(err, &ce) && ce.Code != ExitUnreachable:
			fmt.Fprintf(stderr, "hookd: %s: %v\n", id, err)
			refused++
			if first == nil {
				first = ce
			}
			continue
		case err != nil:
			return err
		}
		if *asJSON {
			answers = append(answers, json.RawMessage(body))
			continue
		}
		var a apiclient.EventAction
		if err := decode(body, &a); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s %s\n", a.Id, a.Result)
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(answers); err != nil {
			return err
		}
	}
	if first != nil {
		return &Error{Code: first.Code, Err: fmt.Errorf("%d of %d events not retried", refused, len(ids))}
	}
	return nil
}
