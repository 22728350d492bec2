package netblock_test

import (
	"testing"

	"github.com/hookd/hookd/internal/netblock"
)

func TestOf_IPv6CountsPerSlash64(t *testing.T) {
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
		if got := netblock.Of(in); got != want {
			t.Errorf("Of(%q) = %q, want %q", in, got, want)
		}
	}
}
