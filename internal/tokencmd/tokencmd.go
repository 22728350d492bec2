// Package tokencmd is `hookd tokens`: create an API token for an account,
// list the tokens, and revoke one, each audited in the command line's name.
// Create always works on the database, which is how the first token is
// made; list and revoke go through a Backend: the API when HOOKD_API_URL
// is set, else the database.
package tokencmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookd/hookd/internal/config"
	"github.com/hookd/hookd/internal/store/tokens"
)

// Usage is the answer to `hookd tokens` without a valid subcommand.
const Usage = `usage: hookd tokens create --name NAME --scope read|operate|admin [--expires 90d|never] --account EMAIL|ID
       hookd tokens list [--json]
       hookd tokens revoke ID`

// Deps are what the command needs of the program around it.
type Deps struct {
	// Open opens hookd's database for cfg's settings, migrated: the first
	// token is often made before hookd's first start.
	Open func(ctx context.Context, cfg config.Config) (*pgxpool.Pool, error)
	// Actor is who the audit log names for the command's changes.
	Actor string
	// Remote opens the API of the hookd HOOKD_API_URL names, where list
	// and revoke act when it is set (the command line's client).
	Remote func(getenv func(string) string) (Backend, error)
}

// databaseSettings are the only settings the command reads, so its -h
// lists them and its own flags, not every one of serve's.
var databaseSettings = []string{"DATABASE_URL", "HOOKD_MIGRATE_DATABASE_URL"}

// Run runs `hookd tokens` with args, the arguments after "tokens".
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, deps Deps) error {
	if len(args) == 0 {
		return errors.New(Usage)
	}
	switch sub, rest := args[0], args[1:]; sub {
	case "create":
		return create(ctx, rest, getenv, stdout, stderr, deps)
	case "list":
		return list(ctx, rest, getenv, stdout, stderr, deps)
	case "revoke":
		return revoke(ctx, rest, getenv, stdout, stderr, deps)
	default:
		return errors.New(Usage)
	}
}

// openDatabase reads the database's settings and the command's own flags
// (extra) from args and getenv, and opens it; closeDB closes it.
func openDatabase(ctx context.Context, cmd string, args []string, getenv func(string) string, stderr io.Writer,
	deps Deps, extra func(*flag.FlagSet)) (_ *Database, closeDB func(), _ error) {
	cfg, err := config.ParseOnly("tokens "+cmd, databaseSettings, args, getenv, stderr, extra)
	if err != nil {
		return nil, nil, err
	}
	pool, err := deps.Open(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return NewDatabase(pool, deps.Actor), pool.Close, nil
}

// openBackend opens where list and revoke act, reading the command's own
// flags (extra): the API of the hookd HOOKD_API_URL names when it is set,
// else hookd's database, whose settings it reads as openDatabase does.
func openBackend(ctx context.Context, cmd string, args []string, getenv func(string) string, stderr io.Writer,
	deps Deps, extra func(*flag.FlagSet)) (_ Backend, closeBackend func(), _ error) {
	if getenv("HOOKD_API_URL") != "" && deps.Remote != nil {
		if _, err := config.ParseOnly("tokens "+cmd, nil, args, getenv, stderr, extra); err != nil {
			return nil, nil, err
		}
		api, err := deps.Remote(getenv)
		return api, func() {}, err
	}
	db, closeDB, err := openDatabase(ctx, cmd, args, getenv, stderr, deps, extra)
	if err != nil {
		return nil, nil, err
	}
	return db, closeDB, nil
}

func create(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, deps Deps) error {
	var name, scopeName, expires, account string
	db, closeDB, err := openDatabase(ctx, "create", args, getenv, stderr, deps, func(fs *flag.FlagSet) {
		fs.StringVar(&name, "name", "", "what the token is for, e.g. where it is deployed (required)")
		fs.StringVar(&scopeName, "scope", "", "read, operate or admin; at most the account's role (required)")
		fs.StringVar(&expires, "expires", "never", "lifetime: days (90d), a duration (12h), or never")
		fs.StringVar(&account, "account", "", "the email or id of the account the token acts for (required)")
	})
	if err != nil {
		return err
	}
	defer closeDB()
	if name == "" || scopeName == "" || account == "" {
		return errors.New("tokens create needs --name, --scope and --account\n" + Usage)
	}
	secret, t, err := db.Create(ctx, account, name, scopeName, expires)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "Created token %d (%s) for %s, scope %s, %s.\n"+
		"Its secret, on stdout, is shown this once and never again: store it now, e.g. in your secret manager.\n",
		t.ID, t.Name, t.AccountEmail, t.Scope, expiry(t.ExpiresAt))
	fmt.Fprintln(stdout, secret)
	// Not the secret again: stderr is what a pipeline's log keeps when
	// stdout is captured.
	fmt.Fprintf(stderr, "Send it as the header\n    Authorization: Bearer %s...\n"+
		"on requests to /api/v1, or set HOOKD_API_URL and HOOKD_API_TOKEN for the hookd command.\n"+
		"To rotate it: create another, deploy that one, then hookd tokens revoke %d.\n", tokens.Prefix, t.ID)
	return nil
}

func list(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, deps Deps) error {
	var asJSON bool
	backend, closeBackend, err := openBackend(ctx, "list", args, getenv, stderr, deps, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print the tokens as a JSON array, for scripts")
	})
	if err != nil {
		return err
	}
	defer closeBackend()
	ts, err := backend.List(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(ts)
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tSCOPE\tACCOUNT\tCREATED\tEXPIRES\tLAST USED\tREVOKED")
	for _, t := range ts {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Scope, t.AccountEmail,
			when(&t.CreatedAt, ""), when(t.ExpiresAt, "never"), when(t.LastUsedAt, "never"), when(t.RevokedAt, "-"))
	}
	return w.Flush()
}

func revoke(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, deps Deps) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return errors.New("tokens revoke needs the token's id (hookd tokens list shows them)\n" + Usage)
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || id <= 0 {
		return fmt.Errorf("%q is not a token id: want the number hookd tokens list shows", args[0])
	}
	backend, closeBackend, err := openBackend(ctx, "revoke", args[1:], getenv, stderr, deps, func(*flag.FlagSet) {})
	if err != nil {
		return err
	}
	defer closeBackend()
	t, err := backend.Revoke(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "revoked token %d (%s) of %s: every request with it is refused from now on\n",
		t.ID, t.Name, t.AccountEmail)
	return nil
}

// expiry says when a token expires, in a sentence.
func expiry(at *time.Time) string {
	if at == nil {
		return "never expires"
	}
	return "expires " + when(at, "")
}

// when writes a moment as the table shows it, or none when there is none.
func when(at *time.Time, none string) string {
	if at == nil {
		return none
	}
	return at.UTC().Format("2006-01-02 15:04 UTC")
}
