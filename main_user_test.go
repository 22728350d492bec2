package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hookd/hookd/internal/store/accounts"
)

func TestUserCommand_AddsAndChangesPasswordsFromStdin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bundle := setup(t)
	getenv := func(k string) string {
		if k == "DATABASE_URL" {
			return bundle.dbURL
		}
		return ""
	}
	user := func(stdin string, args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(ctx, append([]string{"user"}, args...), getenv, strings.NewReader(stdin), &out, &errOut)
		return out.String(), err
	}

	out, err := user("first password\n", "add", "ops@example.com", "-role", "operator")
	if err != nil {
		t.Fatalf("user add: %v", err)
	}
	if !strings.Contains(out, "ops@example.com (operator)") {
		t.Errorf("user add printed %q", out)
	}
	if _, err := user("another password\n", "add", "OPS@example.com"); err == nil {
		t.Error("a second account for the same email was added")
	}
	if _, err := user("short\n", "add", "v@example.com"); err == nil {
		t.Error("a short password was accepted")
	}
	if _, err := user("first password\n", "add", "x@example.com", "-role=root"); err == nil {
		t.Error("an unknown role was accepted")
	}
	if _, err := user("second password", "passwd", "ops@example.com"); err != nil {
		t.Fatalf("user passwd: %v", err)
	}
	if _, err := user("second password\n", "passwd", "nobody@example.com"); err == nil {
		t.Error("passwd of an unknown account succeeded")
	}

	accts := accounts.New(bundle.pool)
	if _, err := accts.Authenticate(ctx, "ops@example.com", "first password"); !errors.Is(err, accounts.ErrBadCredentials) {
		t.Errorf("the old password still works: %v", err)
	}
	u, err := accts.Authenticate(ctx, "ops@example.com", "second password")
	if err != nil || u.Role != accounts.RoleOperator {
		t.Errorf("new password: %v, role %s; want operator", err, u.Role)
	}

	// check tells the three cases apart, as make run needs to: another
	// clone's account keeps its own password.
	if out, err := user("second password\n", "check", "ops@example.com"); err != nil || !strings.Contains(out, "signs in") {
		t.Errorf("check of the right password: %q, %v", out, err)
	}
	if _, err := user("first password\n", "check", "ops@example.com"); !errors.Is(err, errOtherPassword) {
		t.Errorf("check of another password: %v, want errOtherPassword", err)
	}
	if _, err := user("any password\n", "check", "nobody@example.com"); !errors.Is(err, errNoAccount) ||
		!strings.Contains(err.Error(), "no account for nobody@example.com") {
		t.Errorf("check of an unknown account: %v, want errNoAccount", err)
	}
}
