package main

import (
	"bytes"
	"context"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/queue/queuetest"
)

// TestRunKeysRotate: each `hookd keys rotate` adds a generation of the
// sign-in form key, says until when the one it replaced is accepted,
// writes an audit entry, and keeps only the newest three generations.
func TestRunKeysRotate(t *testing.T) {
	t.Parallel()
	bundle := setup(t)
	env := envOf(map[string]string{"DATABASE_URL": bundle.dbURL})
	// A replica made the first key at its first sign-in form.
	if _, err := accounts.New(bundle.pool).SigningKeys(t.Context(), accounts.SignInFormKey); err != nil {
		t.Fatal(err)
	}

	for gen := 2; gen <= 5; gen++ {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"keys", "rotate"}, env, strings.NewReader(""), &out, io.Discard); err != nil {
			t.Fatalf("keys rotate: %v", err)
		}
		want := "rotated the sign-in form key to generation " + strconv.Itoa(gen) +
			": every replica signs with it within 1m0s; forms signed with generation " + strconv.Itoa(gen-1) + " are accepted until "
		if !strings.HasPrefix(out.String(), want) {
			t.Errorf("keys rotate said %q, want it to start %q", out.String(), want)
		}
	}
	keys, err := accounts.New(bundle.pool).SigningKeys(t.Context(), accounts.SignInFormKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 || keys[0].Generation != 5 || keys[0].RetiredAt != nil || keys[2].Generation != 3 || keys[1].RetiredAt == nil {
		t.Errorf("keys after four rotations: %+v, want generations 5 (signing), 4 and 3", keys)
	}
	if n := queuetest.Count(t, bundle.pool, `SELECT count(*) FROM audit_log
		WHERE action = 'key_rotate' AND user_email LIKE 'command line: %@%' AND target LIKE 'sign-in form key, generation _'`); n != 4 {
		t.Errorf("%d key rotations in the audit log, want 4", n)
	}

	err = run(context.Background(), []string{"keys"}, env, strings.NewReader(""), io.Discard, io.Discard)
	if err == nil || err.Error() != "usage: hookd keys rotate" {
		t.Errorf("hookd keys without rotate: %v, want the usage", err)
	}
}
