// Command hookd receives Stripe webhooks, makes sure each is processed once,
// keeps the ones that fail on a durable retry queue in PostgreSQL, and shows
// support staff what failed.
//
// Usage:
//
//	hookd [serve]   run the receiver, the retry loop, the pruner and the dashboard
//	hookd migrate   apply the database migrations and exit
//	hookd send-test-event [-n 50] [-type invoice.paid] [-thin] [-account acct_...] [-ping] [-generation-failure] [-endpoint label] [-url URL]
//	hookd user add EMAIL [-role viewer|operator|admin]
//	                add a dashboard account; the password is read from the terminal or stdin
//	hookd user passwd EMAIL
//	                set an account's password, read the same way
//	hookd user check EMAIL
//	                say whether the password, read the same way, signs in as EMAIL
//	hookd keys rotate
//	                replace the sign-in form key; the old one is accepted for an hour
//	hookd demo-app  run the app `make run` forwards to, which fails some events on purpose
//	hookd doctor    check the configuration end to end, one line per check
//	hookd reconcile [-since 72h] [-dry-run] [-event evt_...]
//	                recover the events Stripe could not deliver, from its Events API
//	hookd erase -customer cus_...
//	                erase the payloads of every event about a customer, for a GDPR request
//	hookd tokens create --name NAME --scope read|operate|admin [--expires 90d] --account EMAIL
//	                make an API token for an account; its secret is printed once
//	hookd tokens list [--json] | hookd tokens revoke ID
//	                list the API tokens, revoke one (through the API when HOOKD_API_URL is set)
//	hookd destinations check [-f FILE]
//	                validate a destinations file without applying it (internal/destcmd)
//	hookd events list|show|retry, hookd failures list|retry, hookd replay create|show, hookd pause, hookd resume
//	                the dashboard's actions through the API of the hookd HOOKD_API_URL names (internal/cli)
//	hookd version   print the version
//
// Every setting comes from an environment variable, overridable by a flag;
// `hookd serve -h` lists them.
//
// This file is the entry point; beside it sit serve.go (the wiring of
// hookd serve), database.go and a file per subcommand. The settings are
// internal/config.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/cli"
	"github.com/hookd/hookd/internal/config"
	"github.com/hookd/hookd/internal/demoapp"
	"github.com/hookd/hookd/internal/destcmd"
	"github.com/hookd/hookd/internal/tokencmd"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr); err != nil {
		os.Exit(exitCode(err, os.Stderr))
	}
}

// exitCode says err on stderr and returns the code hookd exits with: the
// API commands' own (internal/cli: 1 refused, 2 bad usage, 3 hookd
// unreachable or failing), 0 after -h, else 2.
func exitCode(err error, stderr io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintln(stderr, "hookd:", err)
	var coded interface{ ExitCode() int }
	if errors.As(err, &coded) {
		return coded.ExitCode()
	}
	return 2
}

// run is the whole program; main only gives it the process's environment, so
// tests can run it with their own.
func run(ctx context.Context, args []string, getenv func(string) string,
	stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := "serve"
	switch {
	case len(args) == 1 && (args[0] == "-h" || args[0] == "--help"):
		cmd = "help" // serve -h lists serve's settings
	case len(args) > 0 && !isFlag(args[0]):
		cmd, args = args[0], args[1:]
	}
	if command, ok := commands[cmd]; ok {
		return command(ctx, args, getenv, stdout, stderr)
	}
	switch cmd {
	case "serve", "migrate":
		// The two commands that take the whole config.Config, every setting.
		cfg, err := config.Parse(cmd, args, getenv, stderr)
		if err != nil {
			return err
		}
		if cmd == "migrate" {
			return migrate(ctx, cfg, stdout)
		}
		return serve(ctx, cfg, getenv, stdout, stderr)
	case "user":
		return userCommand(ctx, args, getenv, stdin, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "hookd", buildVersion())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		return fmt.Errorf("unknown command %q\n%s", cmd, usage)
	}
}

// commands are the subcommands that read their own flags and settings
// from the arguments after their name and from getenv.
var commands = map[string]func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error{
	"send-test-event": sendTestEvent,
	"demo-app":        demoapp.Command,
	"doctor":          doctorCommand,
	"keys":            keysCommand,
	"reconcile":       reconcileCommand,
	"erase":           eraseCommand,
	"tokens":          tokensCommand,
	"destinations":    destcmd.Run,
	"events":          cli.Events,
	"failures":        cli.Failures,
	"replay":          cli.Replay,
	"pause":           cli.Pause,
	"resume":          cli.Resume,
}

// tokensCommand runs `hookd tokens` (internal/tokencmd) on the database,
// migrated first like the accounts' commands, auditing in the command
// line's name; list and revoke through the API when HOOKD_API_URL is set.
func tokensCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return tokencmd.Run(ctx, args, getenv, stdout, stderr, tokencmd.Deps{
		Open: func(ctx context.Context, cfg config.Config) (*pgxpool.Pool, error) {
			pool, _, err := openMigrated(ctx, cfg)
			return pool, err
		},
		Actor: commandLineActor(),
		Remote: func(getenv func(string) string) (tokencmd.Backend, error) {
			return cli.NewTokens(getenv)
		},
	})
}

const usage = `Usage: hookd <command> [flags]

Commands:
  serve            run the webhook receiver, retry loop, pruner and dashboard (default)
  migrate          apply the database migrations and exit
  send-test-event  post signed sample Stripe events to a receiver (-n 50: a realistic mix; -thin, -account, -ping: thin, Connect and ping events)
  user add EMAIL [-role viewer|operator|admin]
                   add a dashboard account (the password is read from the terminal or stdin)
  user passwd EMAIL
                   set an account's password, read the same way
  user check EMAIL
                   say whether the password, read the same way, signs in as EMAIL
  keys rotate      replace the sign-in form key on every replica within a minute;
                   forms signed with the old one are accepted for an hour
  demo-app         run the demo app make run forwards to, which fails some events on purpose
  doctor           check the configuration end to end: database, secret, app, timeouts, Stripe, clock
  reconcile [-since 72h] [-dry-run] [-event evt_...]
                   run the events Stripe could not deliver through the pipeline,
                   read from its Events API (needs STRIPE_API_KEY)
  erase -customer cus_...
                   erase the event log's payloads of every event about a customer (GDPR), audited
  tokens create --name NAME --scope read|operate|admin [--expires 90d] --account EMAIL
                   make an API token for an account, audited; its secret is printed once
  tokens list [--json]
                   list every account's API tokens
  tokens revoke ID revoke an API token, audited: requests with it are refused at once
                   (list and revoke go through the API when HOOKD_API_URL is set)
  destinations check [-f FILE]
                   validate a destinations file (default: HOOKD_DESTINATIONS_FILE) with this
                   environment, without applying it; exit 1 and one line when it is refused
  version          print the version

Through the API of the hookd HOOKD_API_URL names, with the token HOOKD_API_TOKEN:
  events list [--status dead|pending|failed|retrying] [--type T] [--json]
                   list the queue's events, dead ones by default
  events show ID [--json]
                   an event (evt_...) with its attempts and payload
  events retry ID... [--json]
                   send dead events back to the queue, due now
  failures list [--type T] [--json]
                   the failure groups, the largest first
  failures retry GROUP [--type T] [--dry-run] [--json]
                   retry every event of a failure group
  replay create --name NAME --from TIME [--to TIME] [--types a,b] [--status processed,pending,dead] [--dry-run] [--no-wait]
                   replay the event log's events to the app, on the server; shows its progress until done
  replay show ID [--wait] [--json]
                   a replay's progress
  pause --reason R pause every delivery to the app
  resume           resume delivery, or close an open circuit breaker
  Exit codes: 0 done, 1 refused, 2 bad usage, 3 hookd unreachable or failing.

Run "hookd <command> -h" for a command's flags.
`

func isFlag(arg string) bool { return len(arg) > 0 && arg[0] == '-' }

func buildVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
		if info.Main.Version != "" && info.Main.Version != "(devel)" {
			return info.Main.Version
		}
	}
	return "dev"
}
