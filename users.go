package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/term"

	"github.com/hookd/hookd/internal/config"
	"github.com/hookd/hookd/internal/store/accounts"
)

// userCommand runs `hookd user add EMAIL [-role ROLE]`, `hookd user
// passwd EMAIL` and `hookd user check EMAIL`, which says whether the
// password signs in as EMAIL (make run asks it before telling a newcomer a
// password that another clone's account would not take). The password never comes from the command line, where
// other users of the machine and the shell history would see it: it is read
// from the terminal without echo, or as the first line of stdin when that is
// not a terminal.
func userCommand(ctx context.Context, args []string, getenv func(string) string,
	stdin io.Reader, stdout, stderr io.Writer) error {
	const userUsage = "usage: hookd user add EMAIL [-role viewer|operator|admin] | hookd user passwd EMAIL | hookd user check EMAIL"
	if len(args) < 2 || isFlag(args[1]) {
		return errors.New(userUsage)
	}
	sub, email, rest := args[0], args[1], slices.Clone(args[2:])
	if sub != "add" && sub != "passwd" && sub != "check" {
		return errors.New(userUsage)
	}
	roleName := string(accounts.RoleViewer)
	for i := 0; sub == "add" && i < len(rest); i++ {
		switch a := rest[i]; {
		case a == "-role" || a == "--role":
			if i+1 == len(rest) {
				return errors.New("-role needs a value: viewer, operator or admin")
			}
			roleName = rest[i+1]
			rest = slices.Delete(rest, i, i+2)
			i--
		case strings.HasPrefix(a, "-role=") || strings.HasPrefix(a, "--role="):
			_, roleName, _ = strings.Cut(a, "=")
			rest = slices.Delete(rest, i, i+1)
			i--
		}
	}
	role, err := accounts.ParseRole(roleName)
	if err != nil {
		return err
	}
	accts, closeDB, err := openAccounts(ctx, "user "+sub, rest, getenv, stderr)
	if err != nil {
		return err
	}
	defer closeDB()
	password, err := readPassword(stdin, stderr)
	if err != nil {
		return err
	}
	if sub == "add" {
		u, err := accts.CreateUser(ctx, email, password, role)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "added %s (%s)\n", u.Email, u.Role)
		return nil
	}
	if sub == "check" {
		return checkPassword(ctx, accts, email, password, stdout)
	}
	if err := accts.SetPassword(ctx, email, password); errors.Is(err, accounts.ErrNotFound) {
		return fmt.Errorf("no account for %s", email)
	} else if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "password of %s changed\n", email)
	return nil
}

// checkPassword says whether password signs in as email: nil when it
// does, errNoAccount when there is no such account, errOtherPassword when
// the account's password is another.
func checkPassword(ctx context.Context, accts *accounts.Store, email, password string, stdout io.Writer) error {
	if _, err := accts.UserByEmail(ctx, email); errors.Is(err, accounts.ErrNotFound) {
		return fmt.Errorf("%w %s", errNoAccount, email)
	} else if err != nil {
		return err
	}
	if _, err := accts.Authenticate(ctx, email, password); errors.Is(err, accounts.ErrBadCredentials) {
		return fmt.Errorf("%s: %w", email, errOtherPassword)
	} else if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s signs in with this password\n", email)
	return nil
}

var (
	errNoAccount     = errors.New("no account for")
	errOtherPassword = errors.New("the account's password is another (hookd user passwd sets it)")
)

func readPassword(stdin io.Reader, stderr io.Writer) (string, error) {
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(stderr, "Password: ")
		first, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(stderr)
		if err != nil {
			return "", fmt.Errorf("read password: %w", err)
		}
		fmt.Fprint(stderr, "Again: ")
		again, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(stderr)
		if err != nil {
			return "", fmt.Errorf("read password: %w", err)
		}
		if string(first) != string(again) {
			return "", errors.New("the passwords differ")
		}
		return string(first), nil
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && (!errors.Is(err, io.EOF) || line == "") {
		return "", errors.New("read password: expected it on the first line of stdin")
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// openAccounts reads the settings of the command cmd from args and the
// environment, and opens their database for a command that manages
// accounts or their keys, migrated first: the first account is often added
// before hookd's first start. closeDB closes it.
func openAccounts(ctx context.Context, cmd string, args []string, getenv func(string) string, stderr io.Writer) (
	_ *accounts.Store, closeDB func(), _ error) {
	cfg, err := config.Parse(cmd, args, getenv, stderr)
	if err != nil {
		return nil, nil, err
	}
	pool, _, err := openMigrated(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return accounts.New(pool), pool.Close, nil
}
