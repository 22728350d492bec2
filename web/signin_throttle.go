package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hookd/hookd/internal/store/accounts"
)

// How sign-ins are throttled: the counts of failed attempts each attempt
// moves, and the password checks that may run at once.

// Sign-in attempts each count may make within an hour before sign-ins must
// wait. The account is counted per address, so a guesser elsewhere cannot
// make its owner wait; the address alone gets more, as several people
// behind one NAT share it. An IPv6 address counts as its /64, which one
// home or server is given whole: counted one by one, its 2^64 addresses
// would be 2^64 fresh budgets.
const (
	freeAttemptsPerAccount = 5
	// maxEmailLen is the longest email address there is (RFC 5321's path
	// limit less its angle brackets).
	maxEmailLen         = 254
	freeAttemptsPerAddr = 50
	// freeChecksPerAccount is an account's budget across every address:
	// guessers spread over many addresses (each within its own budget)
	// together get this many checks an hour before each further check of
	// the account waits, 1 s, 2 s, 4 s, ... up to 15 minutes. It never
	// applies to a browser the account signed in from before (see
	// knownDeviceCookie), so a stranger can slow new browsers down but
	// never keep the account's owner out. A single address cannot spend it
	// alone: its own count for the account lets it about 17 checks in
	// the first hour.
	freeChecksPerAccount = 20
)

// maxPasswordChecks is how many password checks run at once on a replica.
// Each holds argon2's 19 MiB for about 30 ms of a core; more at once would
// not finish sooner, only hold more memory, so a flood of sign-ins beyond
// it is turned away at once rather than queued. An address (an IPv6 /64)
// holds at most one of them, and one is kept for known browsers, so a
// flood from rotating addresses can fill the others and still not keep out
// a person who signed in from that browser before.
const maxPasswordChecks = 4

// loginKey is how a sign-in count's name is stored: a hash of fixed length,
// so a count costs the same row whatever the email typed, and the table
// holds no address in the clear.
func loginKey(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:])
}

// signInCounts returns the counts a sign-in attempt moves, first the one
// a success clears, or how long it must wait and why when a budget read
// before any count is written is spent.
//
// The attempt counts before the password is checked, in the statement
// that decides whether it may be checked at all (AdmitLogin), so
// concurrent guesses get no more checks than the counts allow, and a
// guesser made to wait learns nothing from further guesses.
func (d *dashboard) signInCounts(ctx context.Context, email, addr, device string, known bool) (
	keys []accounts.LoginKey, wait time.Duration, why string, err error) {
	lower := strings.ToLower(email)
	if known {
		// A browser the account signed in from before has a count of its
		// own: no stranger, at its address or any other, can make it wait.
		return []accounts.LoginKey{{Key: loginKey("account:" + lower + "|device:" + device), Free: freeAttemptsPerAccount}}, 0, "", nil
	}
	accountAtAddress := accounts.LoginKey{Key: loginKey("account:" + lower + "|ip:" + addr), Free: freeAttemptsPerAccount}
	address := accounts.LoginKey{Key: loginKey("ip:" + addr), Free: freeAttemptsPerAddr}
	account := accounts.LoginKey{Key: loginKey("account:" + lower), Free: freeChecksPerAccount, IfAccount: email}
	// The address's and the account's budgets are read first: an attempt
	// that must wait for them is refused before any count is written, so a
	// flood of guesses at fresh emails from one address, or at one account
	// from many, writes nothing.
	if wait, err = d.accounts.LoginDelay(ctx, address.Key, address.Free); err != nil || wait > 0 {
		return nil, wait, fmt.Sprintf("Too many failed sign-ins. Try again in %s.", waitText(wait)), err
	}
	if wait, err = d.accounts.LoginDelay(ctx, account.Key, account.Free); err != nil || wait > 0 {
		return nil, wait, fmt.Sprintf("This account has had too many failed sign-ins from elsewhere. "+
			"Try again in %s, or from a browser you have signed in with before.", waitText(wait)), err
	}
	// The account's own count goes last: only an attempt every other
	// count admits moves it.
	return []accounts.LoginKey{accountAtAddress, address, account}, 0, "", nil
}

// checkSlots bounds the password checks running at once on this replica:
// at most max in all, at most one per holder (an address, or a known
// browser), and the last one only for a known browser. It is counted in
// memory, per replica: a slot is held for about 30 ms, far too short a
// time to share through the database, and what it protects (the replica's
// memory and cores) is per replica too.
type checkSlots struct {
	mu  sync.Mutex
	max int
	// held maps each holder to whether it is a known browser.
	held    map[string]bool
	unknown int
}

func newCheckSlots(max int) *checkSlots {
	return &checkSlots{max: max, held: make(map[string]bool, max)}
}

// take takes a slot for holder and reports whether it got one; a holder
// that already has one gets none. known says the holder is a browser the
// account signed in from before, which may take the slot kept for it.
func (s *checkSlots) take(holder string, known bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.held[holder]; ok || len(s.held) >= s.max || !known && s.unknown >= s.max-1 {
		return false
	}
	s.held[holder] = known
	if !known {
		s.unknown++
	}
	return true
}

// release gives back holder's slot; "" holds none.
func (s *checkSlots) release(holder string) {
	if holder == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if known, ok := s.held[holder]; ok && !known {
		s.unknown--
	}
	delete(s.held, holder)
}
