package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hookd/hookd/e2e/e2etest"
	"github.com/hookd/hookd/internal/config"
)

// The start-up log warns of a role given to every person the provider
// signs in, and of leavers who keep their sessions because nothing seals
// refresh tokens; with neither, it says nothing, and the re-check runs.
func TestAddSignIn_WarnsOfTheOpenDoorAndOfNoRecheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		env   map[string]string
		warns []string
		loops int
	}{
		{"GroupsAndSecret", map[string]string{"HOOKD_OIDC_ROLES": "admin:hookd-admins,viewer:staff"}, nil, 1},
		{"Everyone", map[string]string{"HOOKD_OIDC_ROLES": "admin:hookd-admins,viewer:*"},
			[]string{"gives every person the identity provider signs in a role", "role=viewer"}, 1},
		{"PublicClient", map[string]string{"HOOKD_OIDC_ROLES": "admin:hookd-admins", "HOOKD_OIDC_CLIENT_SECRET": ""},
			[]string{"signed-in people are not re-checked", "needs HOOKD_OIDC_CLIENT_SECRET"}, 0},
		{"RecheckOff", map[string]string{"HOOKD_OIDC_ROLES": "admin:hookd-admins", "HOOKD_OIDC_RECHECK": "off"}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"HOOKD_OIDC_ISSUER": "https://sso.example.com/realms/acme", "HOOKD_OIDC_CLIENT_ID": "hookd",
				"HOOKD_OIDC_CLIENT_SECRET": "s3cret", "HOOKD_PUBLIC_URL": "https://hooks.example.com"}
			for k, v := range tc.env {
				env[k] = v
			}
			cfg, err := config.Parse("serve", nil, envOf(env), new(bytes.Buffer))
			if err != nil {
				t.Fatal(err)
			}
			log := &e2etest.SyncBuffer{}
			s := &server{cfg: cfg, logger: slog.New(slog.NewTextHandler(log, nil))}
			if p := s.addSignIn(nil); p == nil {
				t.Fatal("no provider")
			}
			if len(s.loops) != tc.loops {
				t.Errorf("%d loops, want %d (the re-check's)", len(s.loops), tc.loops)
			}
			got := log.String()
			if len(tc.warns) == 0 && strings.Contains(got, "WARN") {
				t.Errorf("warned: %s", got)
			}
			for _, w := range tc.warns {
				if !strings.Contains(got, w) {
					t.Errorf("the log lacks %q:\n%s", w, got)
				}
			}
		})
	}
}
