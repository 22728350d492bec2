// Package destcmd is `hookd destinations check`: it validates a
// destinations file with the process's environment, as hookd serve would
// at start, without applying it, and says what each destination takes.
package destcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/hookd/hookd/internal/cli"
	"github.com/hookd/hookd/internal/config"
	"github.com/hookd/hookd/internal/destinations"
	"github.com/hookd/hookd/internal/endpoint"
)

// Usage is the answer to `hookd destinations` without a valid subcommand.
const Usage = `usage: hookd destinations check [-f FILE]
       validate a destinations file (default: $HOOKD_DESTINATIONS_FILE) without applying it`

// Exit codes of the command.
const (
	ExitValid   = 0
	ExitInvalid = 1 // the file was read and refused
	ExitUsage   = 2 // the command or its flags are wrong
)

// Error is the command's failure with the exit code it means, as the
// API commands' is.
type Error = cli.Error

func usageError(format string, a ...any) error {
	return &Error{Code: ExitUsage, Err: fmt.Errorf(format, a...)}
}

// Run runs `hookd destinations` with args, the arguments after
// "destinations".
func Run(_ context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError("%s", Usage)
	}
	if args[0] != "check" {
		return usageError("unknown destinations command %q\n%s", args[0], Usage)
	}
	return check(args[1:], getenv, stdout, stderr)
}

// check validates the file -f names, and prints a line for each
// destination and the set's hash.
func check(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := config.NewFlagSet("destinations check",
		"Validate a destinations file with this environment, as hookd serve would at start, without applying it.", stderr)
	path := fs.String("f", getenv("HOOKD_DESTINATIONS_FILE"), "the destinations file [$HOOKD_DESTINATIONS_FILE]")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError("%v", err)
	}
	switch {
	case fs.NArg() > 0:
		return usageError("unexpected argument %q\n%s", fs.Arg(0), Usage)
	case *path == "":
		return usageError("no file: give -f FILE, or set HOOKD_DESTINATIONS_FILE\n%s", Usage)
	}
	set, err := destinations.Load(*path, getenv)
	if err != nil {
		return &Error{Code: ExitInvalid, Err: err}
	}
	if err := checkEndpoints(*path, set, getenv); err != nil {
		return err
	}
	printSet(stdout, set)
	return nil
}

// checkEndpoints holds the destinations' endpoints to the labels of the
// endpoints this environment configures, as hookd serve does; with none
// configured there is nothing to hold them to.
func checkEndpoints(path string, set *destinations.Set, getenv func(string) string) error {
	cfg, err := config.ReadSettings(getenv, "STRIPE_WEBHOOK_SECRET", "STRIPE_WEBHOOK_SECRETS")
	if err != nil {
		return &Error{Code: ExitInvalid, Err: fmt.Errorf("the endpoints to check the file's against: %w", err)}
	}
	var labels []string
	for _, e := range cfg.Endpoints {
		labels = append(labels, e.Label)
	}
	if labels == nil && len(cfg.StripeSecrets) > 0 {
		labels = []string{endpoint.DefaultLabel}
	}
	if labels == nil {
		return nil
	}
	if err := set.CheckEndpoints(labels); err != nil {
		return &Error{Code: ExitInvalid, Err: fmt.Errorf("%s: %w", path, err)}
	}
	return nil
}

// printSet writes a line for each destination, its name, where it sends
// and what it takes, then the set's hash.
func printSet(w io.Writer, set *destinations.Set) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, d := range set.Destinations {
		fmt.Fprintf(tw, "%s\t%s\ttypes %s\t%s\n", d.Name, d.DisplayURL(), strings.Join(d.Types, ","), routesOn(d))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d destinations, hash %s\n", len(set.Destinations), set.Hash)
}

// routesOn says what, besides its types, a destination routes on: each
// rule that is not its default.
func routesOn(d *destinations.Destination) string {
	var rules []string
	if d.Livemode != destinations.Any {
		rules = append(rules, "livemode "+d.Livemode)
	}
	if !isAny(d.Accounts) {
		rules = append(rules, "accounts "+strings.Join(d.Accounts, ","))
	}
	if !isAny(d.Endpoints) {
		rules = append(rules, "endpoints "+strings.Join(d.Endpoints, ","))
	}
	if d.Filter != "" {
		// A filter written over several lines is shown on one.
		rules = append(rules, "filter "+strings.Join(strings.Fields(d.Filter), " "))
	}
	if rules == nil {
		return "every event of those types"
	}
	return strings.Join(rules, "; ")
}

func isAny(list []string) bool {
	return len(list) == 1 && list[0] == destinations.Any
}
