package accounts

import (
	"fmt"
	"strings"
	"testing"

	"golang.org/x/crypto/argon2"
)

// An unknown account's check must cost what a real one costs: the written
// out dummy hash has to carry the parameters new hashes get.
func TestDummyHashUsesTheCurrentParameters(t *testing.T) {
	t.Parallel()
	want := fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$", argon2.Version, argonMemory, argonTime, argonThreads)
	if !strings.HasPrefix(dummyHash, want) {
		t.Errorf("dummyHash starts %q, want %q: hash the dummy password again with the new parameters", dummyHash[:len(want)], want)
	}
	if !checkPassword(dummyHash, "hookd: no such account") {
		t.Error("dummyHash is not a valid hash of its password")
	}
}
