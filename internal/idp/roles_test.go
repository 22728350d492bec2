package idp_test

import (
	"testing"

	"github.com/hookd/hookd/internal/idp"
	"github.com/hookd/hookd/internal/store/accounts"
)

func TestRoles_HighestRoleOfAnyGroup(t *testing.T) {
	t.Parallel()
	roles, err := idp.ParseRoles(" admin:hookd-admins, operator:support ,operator:oncall,viewer:* ")
	if err != nil {
		t.Fatal(err)
	}
	if got := roles.String(); got != "admin:hookd-admins,operator:support,operator:oncall,viewer:*" {
		t.Errorf("String() = %q", got)
	}
	for _, tc := range []struct {
		groups []string
		want   accounts.Role
	}{
		{nil, accounts.RoleViewer},
		{[]string{"oncall"}, accounts.RoleOperator},
		{[]string{"support", "hookd-admins"}, accounts.RoleAdmin},
		{[]string{"hookd-admins", "support"}, accounts.RoleAdmin},
		{[]string{"Hookd-Admins"}, accounts.RoleViewer}, // groups are compared exactly
	} {
		if got, ok := roles.For(tc.groups); !ok || got != tc.want {
			t.Errorf("For(%q) = %q, %v; want %q", tc.groups, got, ok, tc.want)
		}
	}
	strict, err := idp.ParseRoles("admin:hookd-admins")
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := strict.For([]string{"marketing"}); ok {
		t.Errorf("a group the mapping does not name got %q", got)
	}
	if got := strict.AdminGroups(); len(got) != 1 || got[0] != "hookd-admins" {
		t.Errorf("AdminGroups() = %q", got)
	}
}

func TestParseRoles_Refusals(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"admin", "admin:", "owner:everyone", ":x"} {
		if _, err := idp.ParseRoles(bad); err == nil {
			t.Errorf("ParseRoles(%q) accepted it", bad)
		}
	}
}
