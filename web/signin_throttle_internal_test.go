package web

import "testing"

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
