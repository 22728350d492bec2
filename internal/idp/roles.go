package idp

import (
	"fmt"
	"strings"

	"github.com/hookd/hookd/internal/store/accounts"
)

// AnyGroup in a role mapping stands for everyone the provider signs in,
// whatever their groups.
const AnyGroup = "*"

// Grant gives Role to the members of Group.
type Grant struct {
	Role  accounts.Role
	Group string
}

// Roles is HOOKD_OIDC_ROLES: which groups give which of hookd's roles.
type Roles []Grant

// ParseRoles reads a mapping like admin:hookd-admins,operator:support,viewer:*.
// A role may be given by several groups, one pair each.
func ParseRoles(s string) (Roles, error) {
	var roles Roles
	for pair := range strings.SplitSeq(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		name, group, ok := strings.Cut(pair, ":")
		group = strings.TrimSpace(group)
		if !ok || group == "" {
			return nil, fmt.Errorf("%q is not role:group, e.g. admin:hookd-admins", pair)
		}
		role, err := accounts.ParseRole(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		roles = append(roles, Grant{Role: role, Group: group})
	}
	return roles, nil
}

// String writes the mapping as ParseRoles reads it.
func (r Roles) String() string {
	pairs := make([]string, len(r))
	for i, g := range r {
		pairs[i] = string(g.Role) + ":" + g.Group
	}
	return strings.Join(pairs, ",")
}

// For returns the highest role the groups give, or false when they give
// none.
func (r Roles) For(groups []string) (accounts.Role, bool) {
	var best accounts.Role
	for _, g := range r {
		if best != "" && best.Allows(g.Role) {
			continue
		}
		for _, member := range groups {
			if member == g.Group {
				best = g.Role
				break
			}
		}
		if g.Group == AnyGroup {
			best = g.Role
		}
	}
	return best, best != ""
}

// AdminGroups returns the groups that give admin.
func (r Roles) AdminGroups() []string {
	var groups []string
	for _, g := range r {
		if g.Role == accounts.RoleAdmin {
			groups = append(groups, g.Group)
		}
	}
	return groups
}

// Everyone returns the role the mapping gives every person the provider
// signs in (through AnyGroup), and false when it gives none: with a
// provider anyone can get an account at (Google, GitLab.com, Entra's
// common endpoint, a realm with self-registration), that is everyone.
func (r Roles) Everyone() (accounts.Role, bool) {
	return r.For(nil)
}
