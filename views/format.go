package views

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/queue"

	"github.com/hookd/hookd/views/humanize"
)

// Count formats n for people: 1234567 as "1,234,567".
func Count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Plural returns "1 event" or "3 events", the count formatted by Count.
func Plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return Count(n) + " " + many
}

// Absolute formats t in UTC to the second, for title attributes and tables.
func Absolute(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// relative formats t against now: "just now", "3 min ago", "in 2 h".
func relative(t, now time.Time) string {
	d := now.Sub(t)
	if d < 0 {
		return "in " + humanize.Duration(-d)
	}
	if d < 5*time.Second {
		return "just now"
	}
	return humanize.Duration(d) + " ago"
}

// Age formats how long ago t was, without "ago": "3 min", "2 days".
func Age(t, now time.Time) string {
	return humanize.Duration(max(now.Sub(t), 0))
}

// took formats how long an attempt ran: "<1 ms", "42 ms", "1.3 s". Most
// attempts take milliseconds, which a whole-second format would show as 0.
func took(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return "<1 ms"
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	default:
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
}

// shorten cuts s to at most n characters, marking the cut with an ellipsis.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return strings.TrimSpace(string(r[:n-1])) + "…"
}

// deref returns *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func statusText(status int) string {
	return fmt.Sprintf("%d %s", status, http.StatusText(status))
}

// DescribeFilter says in words what an event filter keeps, "" for no
// filter: the list's heading and the audit log's entry for a bulk retry
// say it alike.
func DescribeFilter(f queue.EventFilter) string {
	var parts []string
	if f.EventType != "" {
		parts = append(parts, "type "+f.EventType)
	}
	if f.ErrorContains != "" {
		parts = append(parts, fmt.Sprintf("last error containing %q", f.ErrorContains))
	}
	if f.EventID != "" {
		parts = append(parts, "id "+f.EventID)
	}
	if f.ErrorGroup != "" {
		parts = append(parts, fmt.Sprintf("last error like %q", f.ErrorGroup))
	}
	if f.StuckAfter > 0 {
		parts = append(parts, "no answer")
	}
	if f.Endpoint != "" {
		parts = append(parts, "endpoint "+f.Endpoint)
	}
	if f.Destination != "" {
		parts = append(parts, "destination "+f.Destination)
	}
	if f.Livemode != nil {
		parts = append(parts, modeLabel(f.Livemode)+" mode")
	}
	if f.Account != "" {
		parts = append(parts, "account "+f.Account)
	}
	if f.Destination != "" {
		parts = append(parts, "destination "+f.Destination)
	}
	return strings.Join(parts, ", ")
}

// ParseMode reads the mode filter: live, test, or anything else for
// either.
func ParseMode(v string) *bool {
	switch v {
	case "live":
		b := true
		return &b
	case "test":
		b := false
		return &b
	}
	return nil
}

// ModeValue is livemode as the mode filter writes it: live, test or "".
func ModeValue(livemode *bool) string {
	switch {
	case livemode == nil:
		return ""
	case *livemode:
		return "live"
	}
	return "test"
}

// modeLabel is livemode as a badge says it; "" when the event did not
// say.
func modeLabel(livemode *bool) string { return ModeValue(livemode) }

// actionLabel names an audit action for people. Most are stored as one
// readable word already; the others are spelled out.
func actionLabel(a audit.Action) string {
	switch a {
	case audit.RetryAll:
		return "retry all"
	case audit.RetryNow:
		return "retry now"
	case audit.RetryGroup:
		return "retry group"
	case audit.AccountAdd:
		return "account added"
	case audit.AccountRole:
		return "role changed"
	case audit.AccountRemove:
		return "account removed"
	case audit.Reconcile:
		return "reconciled with Stripe"
	case audit.Pull:
		return "pulled from Stripe"
	case audit.KeyRotate:
		return "sign-in form key rotated"
	case audit.DeliveryPause:
		return "delivery paused"
	case audit.DeliveryResume:
		return "delivery resumed"
	case audit.Erase:
		return "payloads erased"
	case audit.ReplayStart:
		return "replay started"
	case audit.Failover:
		return "database failed over"
	case audit.ReplayCancel:
		return "replay cancelled"
	case audit.AccessRevoked:
		return "access revoked by the identity provider"
	case audit.EmergencyLogin:
		return "emergency admin login"
	case audit.TokenCreate:
		return "API token created"
	case audit.TokenRevoke:
		return "API token revoked"
	case audit.DestinationAdd:
		return "destination added"
	case audit.DestinationEdit:
		return "destination changed"
	case audit.DestinationRemove:
		return "destination removed"
	case audit.DestinationPause:
		return "destination paused"
	case audit.DestinationResume:
		return "destination resumed"
	case audit.DestinationMove:
		return "deliveries moved"
	case audit.DestinationDrop:
		return "deliveries dropped"
	case audit.OrderRelease:
		return "held key released"
	}
	return string(a)
}

// codeSpans splits s at its backticks: the odd parts are what a message
// written for a terminal or a chat quotes as code (`kind=thin`), which a
// page shows as code rather than with the backticks. An unmatched last
// backtick is kept as text.
func codeSpans(s string) []string {
	parts := strings.Split(s, "`")
	if len(parts)%2 == 0 {
		last := len(parts) - 1
		parts[last-1] += "`" + parts[last]
		parts = parts[:last]
	}
	return parts
}
