package cli

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"

	"github.com/hookd/hookd/web/api/apiclient"
)

// FailuresUsage is `hookd failures`' usage.
const FailuresUsage = `usage: hookd failures list [--type T] [--limit N] [--json]
       hookd failures retry GROUP [--type T] [--dry-run] [--json]`

// Failures is `hookd failures`: list the failure groups, retry one.
func Failures(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return dispatch(ctx, "failures", FailuresUsage, map[string]command{
		"list": failuresList, "retry": failuresRetry,
	}, args, getenv, stdout, stderr)
}

func failuresList(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flagSet("failures list", "List the failure groups on hookd's queue, the largest first: "+
		"one row per cause, its error with ids and numbers masked.", stderr)
	eventType := fs.String("type", "", "only events of exactly this type, e.g. invoice.paid")
	limit := fs.Int("limit", 200, "at most this many groups (1 to 200)")
	asJSON := fs.Bool("json", false, "print the API's JSON")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	c, err := NewClient(getenv)
	if err != nil {
		return err
	}
	body, err := c.read(c.api.ListFailureGroups(ctx, &apiclient.ListFailureGroupsParams{Type: opt(*eventType), Limit: limit}))
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, body)
	}
	var list apiclient.FailureGroupList
	if err := decode(body, &list); err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "GROUP\tEVENTS\tDEAD\tPENDING\tDESTINATION\tLAST SEEN\tTYPES\tERROR")
	for _, g := range list.Groups {
		var types []string
		for _, t := range g.Types {
			types = append(types, fmt.Sprintf("%s (%d)", t.Type, t.Count))
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", g.Id, g.Failed+g.Retrying+g.Dead, g.Dead, g.Failed+g.Retrying, g.Destination,
			when(&g.LastSeen, ""), clip(strings.Join(types, ", "), 40), clip(g.ErrorGroup, 80))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%d of %d failure groups; hookd failures retry GROUP retries one\n", len(list.Groups), list.Total)
	return nil
}

// groupID is the form of a failure group's id (api.GroupID).
var groupID = regexp.MustCompile(`^[0-9a-f]{12}$`)

func failuresRetry(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flagSet("failures retry GROUP", "Retry every event of a failure group: dead ones go back on the queue, "+
		"pending ones become due. GROUP is the group's id as hookd failures list shows it, or its error.", stderr)
	eventType := fs.String("type", "", "only the group's events of this type")
	destination := fs.String("destination", "", "the group's destination, when GROUP is its error; "+
		"every destination the error hit when not given")
	dryRun := fs.Bool("dry-run", false, "change nothing; say how many events would be retried")
	asJSON := fs.Bool("json", false, "print the API's JSON")
	rest, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	c, err := NewClient(getenv)
	if err != nil {
		return err
	}
	group, dest, err := c.resolveGroup(ctx, rest[0], *eventType)
	if err != nil {
		return err
	}
	if dest == "" {
		dest = *destination
	}
	req := apiclient.GroupRetryRequest{Group: group, Destination: opt(dest), Type: opt(*eventType), DryRun: dryRun}
	body, err := c.read(c.api.RetryFailureGroup(ctx, nil, req))
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, body)
	}
	var r apiclient.GroupRetry
	if err := decode(body, &r); err != nil {
		return err
	}
	if r.DryRun {
		fmt.Fprintf(stdout, "would retry at most %d events of %q: %d dead (erased ones stay dead), %d pending; nothing was changed\n",
			r.Count, r.Group, zero(r.Dead), zero(r.Pending))
		return nil
	}
	fmt.Fprintf(stdout, "retried %d events of %q: %d dead sent back to the queue, %d pending due now, "+
		"%d due when their running attempt ends; %d left dead, their payloads erased\n",
		r.Count, r.Group, zero(r.Queued), zero(r.DueNow), zero(r.DueAfterAttempt), zero(r.Erased))
	return nil
}

// resolveGroup returns the error and the destination of the failure
// group arg names: its id, looked up in the list, or the error itself
// (with no destination).
func (c *Client) resolveGroup(ctx context.Context, arg, eventType string) (group, destination string, err error) {
	if !groupID.MatchString(arg) {
		return arg, "", nil
	}
	limit := 200
	body, err := c.read(c.api.ListFailureGroups(ctx, &apiclient.ListFailureGroupsParams{Type: opt(eventType), Limit: &limit}))
	if err != nil {
		return "", "", err
	}
	var list apiclient.FailureGroupList
	if err := decode(body, &list); err != nil {
		return "", "", err
	}
	for _, g := range list.Groups {
		if g.Id == arg {
			return g.ErrorGroup, g.Destination, nil
		}
	}
	return "", "", &Error{Code: ExitRefused, Err: fmt.Errorf("no failure group %s on the queue now: it may have been retried "+
		"or delivered meanwhile (hookd failures list shows the groups)", arg)}
}

func zero(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
