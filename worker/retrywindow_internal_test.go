package worker

import "testing"

func TestRetryWindow_HalvesOnAllFailedTurnsAndDoublesBackOnASuccess(t *testing.T) {
	w := newRetryWindow(500)
	steps := []struct {
		succeeded, failed int
		want              windowChange
		claim             int
	}{
		{0, 0, windowKept, 500},      // nothing ran: no news of the app
		{3, 497, windowKept, 500},    // a success among failures: whole
		{0, 500, windowClosing, 250}, // every attempt failed
		{0, 250, windowNarrowed, 125},
		{0, 0, windowKept, 125}, // released or held: no news
		{0, 125, windowNarrowed, 62},
		{0, 62, windowNarrowed, 31},
		{0, 31, windowNarrowed, 15},
		{0, 15, windowNarrowed, 7},
		{0, 7, windowNarrowed, 3},
		{0, 3, windowNarrowed, 1},
		{0, 1, windowNarrowed, 1}, // never below one
		{1, 0, windowKept, 2},
		{2, 0, windowKept, 4},
		{0, 4, windowNarrowed, 2},
		{1, 1, windowKept, 4},
		{4, 0, windowKept, 8},
		{8, 0, windowKept, 16},
		{16, 0, windowKept, 32},
		{32, 0, windowKept, 64},
		{64, 0, windowKept, 128},
		{128, 0, windowKept, 256},
		{256, 0, windowReopened, 500}, // whole again
		{500, 0, windowKept, 500},
		{0, 500, windowClosing, 250}, // a new run of failures
	}
	for i, s := range steps {
		if got := w.after(s.succeeded, s.failed); got != s.want {
			t.Errorf("step %d (%d succeeded, %d failed): change %d, want %d", i, s.succeeded, s.failed, got, s.want)
		}
		if got := w.claim(); got != s.claim {
			t.Errorf("step %d: claim %d, want %d", i, got, s.claim)
		}
	}
}
