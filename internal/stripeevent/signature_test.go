package stripeevent_test

import (
	"slices"
	"testing"

	"github.com/hookd/hookd/internal/stripeevent"
)

func TestSignatureElements(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, header string
		want         []string
	}{
		{"InOrder", "t=1495999758,v1=ab,v1=cd,v0=ef", []string{"t", "1495999758", "v1", "ab", "v1", "cd", "v0", "ef"}},
		// stripe-go reads " v1" as a key of its own, so hookd does too.
		{"NothingTrimmed", "t=1, v1=ab", []string{"t", "1", " v1", "ab"}},
		{"AnElementWithoutEqualsYieldsNothing", "t=1,junk,v1=", []string{"t", "1", "v1", ""}},
		{"TheFirstEqualsSplits", "v1=a=b", []string{"v1", "a=b"}},
		{"Empty", "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for key, value := range stripeevent.SignatureElements(tt.header) {
				got = append(got, key, value)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("SignatureElements(%q) = %q, want %q", tt.header, got, tt.want)
			}
		})
	}
}
