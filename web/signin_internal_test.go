package web

import "testing"

func TestThrottleAddress_IPv6CountsPerSlash64(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"192.0.2.1":                "192.0.2.1",
		"::ffff:192.0.2.1":         "192.0.2.1",
		"2001:db8:1:2:3:4:5:6":     "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::1":     "2001:db8:1:2::/64",
		"2001:DB8:1:2::9":          "2001:db8:1:2::/64",
		"fe80::1%eth0":             "fe80::/64",
		"::1":                      "::/64",
		"not an address":           "not an address",
		"2001:db8:1:3:3:4:5:6":     "2001:db8:1:3::/64",
		"::ffff:c000:0201":         "192.0.2.1",
		"2001:db8:ffff:ffff:1::":   "2001:db8:ffff:ffff::/64",
		"2001:0db8:0001:0002::0a0": "2001:db8:1:2::/64",
	} {
		if got := throttleAddress(in); got != want {
			t.Errorf("throttleAddress(%q) = %q, want %q", in, got, want)
		}
	}
}

// An address holds one slot, and the last is kept for known browsers.
func TestCheckSlots_OnePerHolderAndOneKept(t *testing.T) {
	t.Parallel()
	s := newCheckSlots(4)
	if !s.take("address a", false) || s.take("address a", false) {
		t.Fatal("an address must get one slot and no second")
	}
	if !s.take("address b", false) || !s.take("address c", false) {
		t.Fatal("other addresses must get the free slots")
	}
	if s.take("address d", false) {
		t.Fatal("an unknown browser took the slot kept for known ones")
	}
	if !s.take("device k", true) || s.take("device j", true) {
		t.Fatal("a known browser must get the kept slot, and nobody a fifth")
	}
	s.release("address a")
	if !s.take("address d", false) {
		t.Fatal("a released slot must be free again")
	}
	if s.take("address e", false) || s.take("device j", true) {
		t.Fatal("four slots are all there are")
	}
	s.release("device k")
	if s.take("address e", false) {
		t.Fatal("an unknown browser took the slot kept for known ones after a known one left it")
	}
	if !s.take("device j", true) {
		t.Fatal("a known browser must get the kept slot")
	}
}
