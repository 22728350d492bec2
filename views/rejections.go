package views

import (
	"fmt"
	"time"

	"github.com/hookd/hookd/internal/store/rejections"
	"github.com/hookd/hookd/views/humanize"
)

// RejectionList is one page of the rejection log.
type RejectionList struct {
	Filter rejections.Filter
	Page   rejections.Page
	// PageNum is the 1-based page shown, PerPage the page size.
	PageNum, PerPage int
	// Prev and Next are the neighbouring pages' URLs, empty at either end.
	Prev, Next string
	// RetentionDays is how long the log keeps a refusal.
	RetentionDays int
	// Tolerance is how old a signature may be; a wrong signature younger
	// than that was made just now, with another secret.
	Tolerance time.Duration
}

// Filtered reports whether any filter narrows the list.
func (l RejectionList) Filtered() bool { return l.Filter.Reason != "" || l.Filter.ClaimedEventID != "" }

func (l RejectionList) from() int64 { return int64((l.PageNum-1)*l.PerPage + 1) }
func (l RejectionList) to() int64   { return l.from() + int64(len(l.Page.Rejections)) - 1 }

// rejectReasons are the rejection log's reasons in the order the filter
// offers them, with their names for people.
var rejectReasons = []struct {
	Reason rejections.Reason
	Label  string
}{
	{rejections.WrongSignature, "Wrong signature"},
	{rejections.StaleSignature, "Stale signature"},
	{rejections.NoSignature, "No signature"},
	{rejections.MalformedSignature, "Malformed signature"},
	{rejections.TooLarge, "Body too large"},
	{rejections.BadJSON, "Not JSON"},
	{rejections.BadID, "No event id"},
	{rejections.BadType, "No event type"},
	{rejections.WrongEndpoint, "Wrong endpoint"},
	{rejections.MethodNotAllowed, "Not a POST"},
	{rejections.UnreadableBody, "Body unreadable"},
}

// KnownRejectReason reports whether r is a reason the log records.
func KnownRejectReason(r rejections.Reason) bool {
	for _, k := range rejectReasons {
		if k.Reason == r {
			return true
		}
	}
	return false
}

// rejectReasonLabel names a refusal reason for people.
func rejectReasonLabel(r rejections.Reason) string {
	for _, k := range rejectReasons {
		if k.Reason == r {
			return k.Label
		}
	}
	return string(r)
}

// claimNote says whose claim a refused delivery's event id is: the body's
// own, unverified, unless its signature verified and the body was refused
// for what it held. An attacker's post can claim any real event's id.
func claimNote(r rejections.Rejection) string {
	if r.Reason.SignatureVerified() {
		return "claimed by a body signed with a configured secret"
	}
	return "claimed by an unverified body"
}

// skewText says how a signature's timestamp stood against the clock that
// refused it: "4 min before the server's clock", "12 s after it".
func skewText(d time.Duration) string {
	switch {
	case d >= -time.Second && d <= time.Second:
		return "at the server's time"
	case d > 0:
		return humanize.Duration(d) + " before the server's clock"
	default:
		return humanize.Duration(-d) + " ahead of the server's clock"
	}
}

// signatureNote reads a signature failure for people: what its timestamp
// and the secrets say about who sent it.
func signatureNote(r rejections.Rejection, tolerance time.Duration) string {
	skew, ok := r.SignatureSkew()
	switch r.Reason {
	case rejections.StaleSignature:
		if !ok {
			return "The header has no timestamp."
		}
		if r.SignatureMatches != nil && *r.SignatureMatches {
			return fmt.Sprintf("Signed with a configured secret, but %s: a sender's clock that is off, or a replayed delivery.", skewText(skew))
		}
		return fmt.Sprintf("Signed %s, and with no configured secret: not a Stripe delivery for this endpoint.", skewText(skew))
	case rejections.WrongSignature:
		if ok && skew < tolerance && skew > -tolerance {
			return fmt.Sprintf("Signed %s, with another secret: is STRIPE_WEBHOOK_SECRET this endpoint's signing secret?", skewText(skew))
		}
		if ok {
			return fmt.Sprintf("Signed %s, with another secret.", skewText(skew))
		}
	}
	if ok {
		return "Signed " + skewText(skew) + "."
	}
	return ""
}
