package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/hookd/hookd/web/api/apiclient"
)

// Pause is `hookd pause --reason R`: hold every delivery to the app.
func Pause(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flagSet("pause", "Hold every delivery to the app: events wait on the queue until hookd resume. "+
		"Every replica holds within a second.", stderr)
	reason := fs.String("reason", "", "why, which every dashboard page's banner shows (required)")
	asJSON := fs.Bool("json", false, "print the API's JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	if *reason == "" {
		fs.Usage()
		return usageError("pause needs --reason: everyone sees it in the dashboard's banner")
	}
	c, err := NewClient(getenv)
	if err != nil {
		return err
	}
	return c.changeDelivery(stdout, *asJSON, "paused")(c.api.PauseDelivery(ctx, nil, apiclient.PauseRequest{Reason: *reason}))
}

// Resume is `hookd resume`: end a pause, or close an open circuit breaker.
func Resume(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flagSet("resume", "End a pause, or close an open circuit breaker: the queue drains at the delivery rate.", stderr)
	asJSON := fs.Bool("json", false, "print the API's JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	c, err := NewClient(getenv)
	if err != nil {
		return err
	}
	return c.changeDelivery(stdout, *asJSON, "resumed")(c.api.ResumeDelivery(ctx, nil))
}

// changeDelivery prints the answer to a pause or a resume.
func (c *Client) changeDelivery(stdout io.Writer, asJSON bool, done string) func(*http.Response, error) error {
	return func(res *http.Response, err error) error {
		body, err := c.read(res, err)
		if err != nil {
			return err
		}
		if asJSON {
			return printJSON(stdout, body)
		}
		var d apiclient.Delivery
		if err := decode(body, &d); err != nil {
			return err
		}
		switch {
		case d.Paused:
			fmt.Fprintf(stdout, "delivery is paused, by %s since %s: %s\n", deref(d.PausedBy), when(d.PausedAt, "?"), deref(d.PausedReason))
		case d.BreakerOpen:
			fmt.Fprintln(stdout, "delivery is held by the open circuit breaker")
		default:
			fmt.Fprintln(stdout, "delivery runs")
		}
		if !d.Changed {
			fmt.Fprintf(stdout, "(it was so already: nothing was %s)\n", done)
		}
		return nil
	}
}
