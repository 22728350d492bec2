package views_test

import (
	"testing"
	"time"

	"github.com/hookd/hookd/internal/store/audit"
	"github.com/hookd/hookd/views"
)

func TestCount(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{
		0: "0", 5: "5", 999: "999", 1000: "1,000", 1234: "1,234", 10_000_000: "10,000,000", -1234567: "-1,234,567",
	} {
		if got := views.Count(n); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestRelative(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		ago  time.Duration
		want string
	}{
		{2 * time.Second, "just now"},
		{40 * time.Second, "40 s ago"},
		{3*time.Minute + 20*time.Second, "3 min ago"},
		{5 * time.Hour, "5 h ago"},
		{72 * time.Hour, "3 days ago"},
		{-10 * time.Minute, "in 10 min"},
	} {
		if got := views.Relative(now.Add(-tc.ago), now); got != tc.want {
			t.Errorf("Relative(now - %s) = %q, want %q", tc.ago, got, tc.want)
		}
	}
}

func TestTook(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		300 * time.Microsecond: "<1 ms", 42 * time.Millisecond: "42 ms", 1340 * time.Millisecond: "1.3 s",
	} {
		if got := views.Took(d); got != want {
			t.Errorf("Took(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestShorten(t *testing.T) {
	t.Parallel()
	if got := views.Shorten("short", 10); got != "short" {
		t.Errorf("Shorten kept %q", got)
	}
	if got := views.Shorten("a long error message", 8); got != "a long…" {
		t.Errorf("Shorten = %q, want %q", got, "a long…")
	}
}

func TestActionLabel_NamesEveryAuditActionInWords(t *testing.T) {
	t.Parallel()
	for a, want := range map[audit.Action]string{
		audit.Login:          "login",
		audit.Retry:          "retry",
		audit.RetryAll:       "retry all",
		audit.RetryNow:       "retry now",
		audit.AccountAdd:     "account added",
		audit.AccountRole:    "role changed",
		audit.AccountRemove:  "account removed",
		audit.Logout:         "logout",
		audit.Prune:          "prune",
		audit.RetryGroup:     "retry group",
		audit.Reconcile:      "reconciled with Stripe",
		audit.Pull:           "pulled from Stripe",
		audit.KeyRotate:      "sign-in form key rotated",
		audit.DeliveryPause:  "delivery paused",
		audit.DeliveryResume: "delivery resumed",
		audit.Erase:          "payloads erased",
		audit.ReplayStart:    "replay started",
		audit.ReplayCancel:   "replay cancelled",
		audit.AccessRevoked:  "access revoked by the identity provider",
		audit.EmergencyLogin: "emergency admin login",
		audit.TokenCreate:    "API token created",
		audit.TokenRevoke:    "API token revoked",

		audit.DestinationAdd:    "destination added",
		audit.DestinationEdit:   "destination changed",
		audit.DestinationRemove: "destination removed",
		audit.OrderRelease:      "held key released",
	} {
		if got := views.ActionLabel(a); got != want {
			t.Errorf("ActionLabel(%s) = %q, want %q", a, got, want)
		}
	}
}
