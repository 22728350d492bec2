// Package netblock names the block of addresses one client holds, for the
// limits that count clients: sign-in throttling and the rejection log's
// budgets.
package netblock

import "net/netip"

// Of is the block a client at ip is counted by: an IPv4 address as it is
// (an IPv4-mapped IPv6 one included), an IPv6 address as its /64, the
// block one home, office or server is given whole, so that a client cannot
// turn one block into 2^64 fresh budgets. Anything else (a connection's
// address is always an IP) is counted as given.
func Of(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.WithZone("").Unmap()
	if a.Is4() {
		return a.String()
	}
	return netip.PrefixFrom(a, 64).Masked().String()
}
