package stripeevent

import (
	"iter"
	"strings"
)

// SignatureElements yields the key and value of each element of a
// Stripe-Signature header ("t=1495999758,v1=ABC,v0=DEF"), in order. It
// splits the header as stripe-go's verification does, on commas and then
// on the "=", trimming nothing, so that what hookd reads of a header (the
// t= the rejection log shows, the v1= a refusal looks for, the elements a
// queue row keeps) is what the verification read; an element without "="
// yields nothing. Checking a value's shape is left to the caller, which
// alone knows what it needs of it.
func SignatureElements(header string) iter.Seq2[string, string] {
	return func(yield func(key, value string) bool) {
		for element := range strings.SplitSeq(header, ",") {
			key, value, ok := strings.Cut(element, "=")
			if ok && !yield(key, value) {
				return
			}
		}
	}
}
