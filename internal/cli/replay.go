package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookd/hookd/web/api/apiclient"
)

// ReplayUsage is `hookd replay`'s usage.
const ReplayUsage = `usage: hookd replay create --name NAME --from TIME [--to TIME] [--types a,b] [--endpoint E] [--object ID]
                           [--status processed,pending,dead] [--dry-run] [--no-wait] [--json]
       hookd replay show ID [--wait] [--json]`

// pollEvery is how often a replay's progress is read while it is waited
// for.
const pollEvery = time.Second

// Replay is `hookd replay`: start a replay on the server and follow it.
func Replay(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return dispatch(ctx, "replay", ReplayUsage, map[string]command{
		"create": replayCreate, "show": replayShow,
	}, args, getenv, stdout, stderr)
}

// replayFlags are replay create's flags, the dashboard's replay form's
// fields.
type replayFlags struct {
	name, from, to, types, endpoint, object, status string
	dryRun, noWait, asJSON                          bool
}

// request is the flags as the API's request, or a usage error.
func (f replayFlags) request(now time.Time) (apiclient.ReplayRequest, error) {
	var req apiclient.ReplayRequest
	var err error
	if f.from == "" {
		return req, usageError("replay create needs --from, when the events to replay start (e.g. 2026-01-31T14:00, in UTC)")
	}
	if req.From, err = parseTime(f.from, now); err != nil {
		return req, usageError("--from: %v", err)
	}
	req.To = now
	if f.to != "" {
		if req.To, err = parseTime(f.to, now); err != nil {
			return req, usageError("--to: %v", err)
		}
	}
	if f.name == "" && !f.dryRun {
		return req, usageError("replay create needs --name: the app sees it in the Hookd-Replay header")
	}
	req.Name, req.Endpoint, req.Object, req.DryRun = opt(f.name), opt(f.endpoint), opt(f.object), &f.dryRun
	if types := strings.FieldsFunc(f.types, func(r rune) bool { return r == ',' || r == ' ' }); len(types) > 0 {
		req.Types = &types
	}
	var statuses []apiclient.ReplayStatus
	for _, s := range strings.FieldsFunc(f.status, func(r rune) bool { return r == ',' || r == ' ' }) {
		st := apiclient.ReplayStatus(s)
		if !st.Valid() {
			return req, usageError("--status: %q is not processed, pending or dead", s)
		}
		statuses = append(statuses, st)
	}
	req.Statuses = &statuses
	return req, nil
}

// parseTime reads a time as RFC 3339, or in UTC as 2006-01-02T15:04 or
// 2006-01-02, or as a duration before now (24h).
func parseTime(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: give 2026-01-31T14:00 (UTC), RFC 3339, or a duration before now (24h)", s)
}

func replayCreate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flagSet("replay create", "Replay the event log's events a filter matches to the app, on the server, "+
		"and show its progress until it is done.", stderr)
	var f replayFlags
	fs.StringVar(&f.name, "name", "", "the replay's name, which the app sees in the Hookd-Replay header (required unless --dry-run)")
	fs.StringVar(&f.from, "from", "", "the events received at or after this time: 2026-01-31T14:00 (UTC), RFC 3339, or 24h ago as 24h (required)")
	fs.StringVar(&f.to, "to", "", "and before this time (default now)")
	fs.StringVar(&f.types, "types", "", "only these event types, comma-separated; invoice.* takes every invoice event")
	fs.StringVar(&f.endpoint, "endpoint", "", "only events that arrived through the endpoint so labelled")
	fs.StringVar(&f.object, "object", "", "only events about this object or customer id")
	fs.StringVar(&f.status, "status", "processed", "which events, comma-separated: processed, pending, dead")
	fs.BoolVar(&f.dryRun, "dry-run", false, "start nothing; say how many events the replay would deliver")
	fs.BoolVar(&f.noWait, "no-wait", false, "print the replay's id and return once it started, without following it")
	fs.BoolVar(&f.asJSON, "json", false, "print the API's JSON (the replay as it ended, unless --no-wait)")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	req, err := f.request(time.Now().UTC())
	if err != nil {
		return err
	}
	c, err := NewClient(getenv)
	if err != nil {
		return err
	}
	body, err := c.read(c.api.CreateReplay(ctx, nil, req))
	if err != nil {
		return err
	}
	if f.dryRun {
		return printPreview(stdout, body, f.asJSON)
	}
	var r apiclient.Replay
	if err := decode(body, &r); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "replay %d %q started: %d events to deliver, on the server\n", r.Id, r.Name, r.Total)
	if f.noWait {
		if f.asJSON {
			return printJSON(stdout, body)
		}
		fmt.Fprintf(stdout, "%d\n", r.Id)
		fmt.Fprintf(stderr, "follow it with: hookd replay show %d --wait\n", r.Id)
		return nil
	}
	return c.follow(ctx, r.Id, f.asJSON, stdout, stderr)
}

func printPreview(stdout io.Writer, body []byte, asJSON bool) error {
	if asJSON {
		return printJSON(stdout, body)
	}
	var p apiclient.ReplayPreview
	if err := decode(body, &p); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "would deliver %d events: %d match, %d of them with no payload left; nothing was started\n",
		p.Replayable, p.Matching, p.Unreplayable)
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tTYPE\tRECEIVED\tSTATUS\tREPLAYABLE")
	for _, e := range p.Sample {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%t\n", e.Id, e.Type, when(&e.ReceivedAt, ""), e.Status, e.Replayable)
	}
	return w.Flush()
}

func replayShow(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flagSet("replay show ID", "Show a replay's progress.", stderr)
	wait := fs.Bool("wait", false, "follow its progress until it is done")
	asJSON := fs.Bool("json", false, "print the API's JSON")
	rest, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(rest[0], 10, 64)
	if err != nil || id <= 0 {
		return usageError("%q is not a replay id: a replay's id is a number", rest[0])
	}
	c, err := NewClient(getenv)
	if err != nil {
		return err
	}
	if *wait {
		return c.follow(ctx, id, *asJSON, stdout, stderr)
	}
	body, err := c.read(c.api.GetReplay(ctx, id))
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, body)
	}
	var r apiclient.Replay
	if err := decode(body, &r); err != nil {
		return err
	}
	fmt.Fprintln(stdout, progress(r))
	return nil
}

// follow reads replay id's progress every pollEvery, writing each change
// to stderr, until it is no longer running; then it prints the replay as
// it ended. A cancelled replay is a refusal.
func (c *Client) follow(ctx context.Context, id int64, asJSON bool, stdout, stderr io.Writer) error {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	var last string
	for {
		body, err := c.read(c.api.GetReplay(ctx, id))
		if err != nil {
			if ctx.Err() != nil {
				return &Error{Code: ExitRefused, Err: fmt.Errorf("stopped following; replay %d runs on: hookd replay show %d", id, id)}
			}
			return err
		}
		var r apiclient.Replay
		if err := decode(body, &r); err != nil {
			return err
		}
		if line := progress(r); line != last {
			fmt.Fprintln(stderr, line)
			last = line
		}
		if r.State != apiclient.Running {
			if asJSON {
				if err := printJSON(stdout, body); err != nil {
					return err
				}
			} else {
				fmt.Fprintln(stdout, last)
			}
			if r.State == apiclient.Cancelled {
				return &Error{Code: ExitRefused, Err: fmt.Errorf("replay %d was cancelled by %s", id, deref(r.CancelledBy))}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return &Error{Code: ExitRefused, Err: errors.New("stopped following; the replay runs on: hookd replay show " +
				strconv.FormatInt(id, 10) + " --wait")}
		case <-tick.C:
		}
	}
}

// progress is a replay's progress in a line.
func progress(r apiclient.Replay) string {
	s := fmt.Sprintf("replay %d %q %s: %d of %d delivered, %d failed, %d skipped", r.Id, r.Name, r.State,
		r.Delivered, r.Total, r.Failed, r.Skipped)
	if r.EtaSeconds != nil {
		s += ", about " + (time.Duration(*r.EtaSeconds) * time.Second).String() + " to go"
	}
	return s
}
