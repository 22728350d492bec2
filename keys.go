package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/store/audit"
)

// keysCommand runs `hookd keys rotate`: a new sign-in form key, stored in
// the database, which every replica signs with from its next read of the
// keys (within accounts.DefaultKeyRefresh), while forms signed with the
// key it replaces are still accepted for accounts.DefaultKeyGrace.
func keysCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	const keysUsage = "usage: hookd keys rotate"
	if len(args) < 1 || args[0] != "rotate" {
		return errors.New(keysUsage)
	}
	accts, closeDB, err := openAccounts(ctx, "keys rotate", args[1:], getenv, stderr)
	if err != nil {
		return err
	}
	defer closeDB()
	var made, replaced accounts.SigningKey
	err = accts.InTx(ctx, func(tx *accounts.Tx) error {
		var err error
		if made, replaced, err = tx.RotateSigningKey(ctx, accounts.SignInFormKey); err != nil {
			return err
		}
		return audit.Record(ctx, tx.PgxTx(), commandLineActor(), audit.KeyRotate,
			fmt.Sprintf("sign-in form key, generation %d", made.Generation), 1)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rotated the sign-in form key to generation %d: every replica signs with it within %s",
		made.Generation, accounts.DefaultKeyRefresh)
	if replaced.RetiredAt != nil {
		fmt.Fprintf(stdout, "; forms signed with generation %d are accepted until %s",
			replaced.Generation, replaced.RetiredAt.Add(accounts.DefaultKeyGrace).UTC().Format("2006-01-02 15:04:05 UTC"))
	}
	fmt.Fprintln(stdout)
	return nil
}

// commandLineActor is who the audit log names for an action taken on the
// server's command line rather than by a signed-in account: the operating
// system's user and the host.
func commandLineActor() string {
	who, host := "unknown user", "unknown host"
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	if h, err := os.Hostname(); err == nil {
		host = h
	}
	return "command line: " + who + "@" + host
}
