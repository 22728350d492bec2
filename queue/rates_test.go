package queue_test

import (
	"testing"
	"time"
)

// Reservations of one destination's slots follow each other, one interval
// apart, from whichever replica; the first starts now.
func TestReserveSlots_FollowOneAnother(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := t.Context()
	first, err := s.ReserveSlots(ctx, "billing", 4, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if d := first.First.Sub(first.DBNow); d < 0 || d > time.Millisecond {
		t.Errorf("the first reservation starts %v from now, want now", d)
	}
	second, err := s.ReserveSlots(ctx, "billing", 2, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := second.First, first.First.Add(200*time.Millisecond); !got.Equal(want) {
		t.Errorf("the second reservation starts at %v, want %v, four intervals after the first", got, want)
	}
	other, err := s.ReserveSlots(ctx, "crm", 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if d := other.First.Sub(other.DBNow); d < 0 || d > time.Millisecond {
		t.Errorf("another destination's first slot is %v from now, want now", d)
	}
}
