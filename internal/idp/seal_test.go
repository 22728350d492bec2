package idp_test

import (
	"bytes"
	"testing"

	"github.com/hookd/hookd/internal/idp"
)

// A kept refresh token is sealed under the client secret: the database's
// copy is not the token, and another secret cannot open it.
func TestRefreshToken_SealedUnderTheClientSecret(t *testing.T) {
	t.Parallel()
	cfg := idp.Config{Issuer: "https://sso.example.com/realms/acme", ClientID: "hookd", ClientSecret: "s3cret"}
	p := idp.New(cfg)
	sealed, err := p.SealRefreshToken("refresh-token-value")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("refresh-token-value")) {
		t.Fatal("the sealed token holds the token in the clear")
	}
	if got, err := p.OpenRefreshToken(sealed); err != nil || got != "refresh-token-value" {
		t.Errorf("opened %q (%v)", got, err)
	}
	cfg.ClientSecret = "rotated"
	if got, err := idp.New(cfg).OpenRefreshToken(sealed); err == nil {
		t.Errorf("another client secret opened the token: %q", got)
	}
	if sealed, err := p.SealRefreshToken(""); err != nil || sealed != nil {
		t.Errorf("no token sealed to %v (%v), want nil", sealed, err)
	}
	cfg.ClientSecret = ""
	if _, err := idp.New(cfg).SealRefreshToken("t"); err == nil {
		t.Error("a public client sealed a token with no secret")
	}
}
