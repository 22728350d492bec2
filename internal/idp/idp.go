// Package idp signs people in through the company's identity provider with
// OpenID Connect: the authorization-code flow with PKCE, state and nonce
// (the state's single use and its tie to the browser are the dashboard's),
// the ID token's checks (signature against the provider's current keys,
// issuer, audience, expiry, nonce), the claims hookd reads from the token
// and, for what the token leaves out, from the userinfo endpoint, and the
// mapping from the provider's groups to hookd's roles.
//
// It keeps no token: the ID token and the access token are read once, in
// Finish, and dropped.
package idp

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/hookd/hookd/internal/store/accounts"
)

// CallbackPath is where the provider sends the browser back; the redirect
// URL is HOOKD_PUBLIC_URL with this path.
const CallbackPath = "/auth/oidc/callback"

// DefaultGroupsClaim is HOOKD_OIDC_GROUPS_CLAIM's default.
const DefaultGroupsClaim = "groups"

// Config is the provider and what hookd is registered there as.
type Config struct {
	// Issuer is HOOKD_OIDC_ISSUER: its discovery document is at
	// Issuer/.well-known/openid-configuration.
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is HOOKD_PUBLIC_URL + CallbackPath, never built from a
	// request's headers, which whoever sends the request chooses.
	RedirectURL string
	// GroupsClaim names the claim holding the person's groups: a list of
	// strings, or one string. Default DefaultGroupsClaim.
	GroupsClaim string
	Roles       Roles
	// HTTPClient reaches the provider. Default: a client with a 10 s
	// timeout.
	HTTPClient *http.Client
}

// Provider is the identity provider, discovered on first use: hookd
// starts, and receives webhooks, while the provider is down.
type Provider struct {
	cfg Config

	mu         sync.Mutex
	discovered *discovered
}

type discovered struct {
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
	oauth    oauth2.Config
}

// New returns the provider cfg describes. It reaches nothing yet.
func New(cfg Config) *Provider {
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = DefaultGroupsClaim
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	return &Provider{cfg: cfg}
}

// Issuer returns HOOKD_OIDC_ISSUER.
func (p *Provider) Issuer() string { return p.cfg.Issuer }

// GroupsClaim returns the claim the groups are read from.
func (p *Provider) GroupsClaim() string { return p.cfg.GroupsClaim }

func (p *Provider) clientContext(ctx context.Context) context.Context {
	return oidc.ClientContext(ctx, p.cfg.HTTPClient)
}

// discover reads the provider's discovery document the first time it
// succeeds. The key set it makes fetches the provider's keys again when a
// token is signed with a key it does not know, so a rotated key is
// picked up at the next sign-in.
func (p *Provider) discover(ctx context.Context) (*discovered, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.discovered != nil {
		return p.discovered, nil
	}
	// The key set keeps this context for its later fetches: no deadline of
	// this request's, only the HTTP client.
	provider, err := oidc.NewProvider(p.clientContext(context.WithoutCancel(ctx)), p.cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("read the discovery document of %s: %w", p.cfg.Issuer, err)
	}
	p.discovered = &discovered{
		provider: provider,
		verifier: provider.Verifier(&oidc.Config{ClientID: p.cfg.ClientID}),
		oauth: oauth2.Config{
			ClientID:     p.cfg.ClientID,
			ClientSecret: p.cfg.ClientSecret,
			RedirectURL:  p.cfg.RedirectURL,
			Endpoint:     provider.Endpoint(),
			Scopes:       p.scopes(),
		},
	}
	return p.discovered, nil
}

// scopes asks for the ID token, the email and profile claims, and a scope
// named like the groups claim unless a standard scope carries it: that is
// how Okta, Keycloak (a client scope named groups) and most others are set
// up to send groups. Providers leave out scopes they do not know.
func (p *Provider) scopes() []string {
	scopes := []string{oidc.ScopeOpenID, "email", "profile"}
	switch p.cfg.GroupsClaim {
	case "email", "preferred_username", "name", "nickname", "sub":
	default:
		scopes = append(scopes, p.cfg.GroupsClaim)
	}
	return scopes
}

// Start is a sign-in begun: the URL to send the browser to, and what the
// callback must get back (State) and check (Nonce, and Verifier, PKCE's
// secret half).
type Start struct {
	URL      string
	State    string
	Nonce    string
	Verifier string
}

// Start begins a sign-in.
func (p *Provider) Start(ctx context.Context) (Start, error) {
	d, err := p.discover(ctx)
	if err != nil {
		return Start{}, err
	}
	s := Start{State: oauth2.GenerateVerifier(), Nonce: oauth2.GenerateVerifier(), Verifier: oauth2.GenerateVerifier()}
	s.URL = d.oauth.AuthCodeURL(s.State, oidc.Nonce(s.Nonce), oauth2.S256ChallengeOption(s.Verifier))
	return s, nil
}

// Identity is who the provider vouched for, and what hookd reads of them.
type Identity struct {
	Issuer  string
	Subject string
	// Email is what the pages show: the email claim, else
	// preferred_username, else the subject.
	Email string
	// EmailUnverified is set when the provider says email_verified false.
	EmailUnverified bool
	// Groups are the groups claim's values; GroupsFound says whether the
	// claim was there at all.
	Groups      []string
	GroupsFound bool
}

// Finish ends a sign-in: it trades code for tokens with PKCE's verifier,
// checks the ID token (signature, issuer, audience, expiry) and its nonce,
// and returns who it names. Its errors say what was wrong, for the page,
// and never hold a token.
func (p *Provider) Finish(ctx context.Context, code, verifier, nonce string) (Identity, error) {
	d, err := p.discover(ctx)
	if err != nil {
		return Identity{}, err
	}
	ctx = p.clientContext(ctx)
	token, err := d.oauth.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		return Identity{}, fmt.Errorf("the provider did not give tokens for the sign-in's code: %w", exchangeError(err))
	}
	raw, ok := token.Extra("id_token").(string)
	if !ok || raw == "" {
		return Identity{}, errors.New("the provider's answer has no ID token")
	}
	idToken, err := d.verifier.Verify(ctx, raw)
	if err != nil {
		return Identity{}, fmt.Errorf("the ID token is not valid: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(idToken.Nonce), []byte(nonce)) != 1 {
		return Identity{}, errors.New("the ID token's nonce is not this sign-in's: it was issued for another")
	}
	claims := map[string]any{}
	if err := idToken.Claims(&claims); err != nil {
		return Identity{}, fmt.Errorf("read the ID token's claims: %w", err)
	}
	// Many providers put the profile, email and groups in the userinfo
	// answer rather than the ID token. Its subject must be the token's
	// (OpenID Connect Core 5.3.2), and it only fills in what the token
	// left out.
	if _, hasGroups := claims[p.cfg.GroupsClaim]; !hasGroups || claims["email"] == nil {
		if err := p.addUserinfo(ctx, d, token, idToken.Subject, claims); err != nil {
			return Identity{}, err
		}
	}
	return p.identity(idToken.Issuer, idToken.Subject, claims)
}

func (p *Provider) addUserinfo(ctx context.Context, d *discovered, token *oauth2.Token, subject string, claims map[string]any) error {
	var endpoint struct {
		URL string `json:"userinfo_endpoint"`
	}
	if err := d.provider.Claims(&endpoint); err != nil || endpoint.URL == "" {
		return nil
	}
	info, err := d.provider.UserInfo(ctx, oauth2.StaticTokenSource(token))
	if err != nil {
		return fmt.Errorf("read the userinfo endpoint: %w", err)
	}
	if info.Subject != subject {
		return errors.New("the userinfo endpoint answered for another subject than the ID token's")
	}
	extra := map[string]any{}
	if err := info.Claims(&extra); err != nil {
		return fmt.Errorf("read the userinfo claims: %w", err)
	}
	for k, v := range extra {
		if _, ok := claims[k]; !ok {
			claims[k] = v
		}
	}
	return nil
}

func (p *Provider) identity(issuer, subject string, claims map[string]any) (Identity, error) {
	id := Identity{Issuer: issuer, Subject: subject, Email: subject}
	for _, name := range []string{"email", "preferred_username"} {
		if s, ok := claims[name].(string); ok && strings.TrimSpace(s) != "" {
			id.Email = strings.TrimSpace(s)
			break
		}
	}
	// A boolean, or the strings "true" and "false" that some providers
	// send; absent says nothing, as with providers that never send it.
	switch v := claims["email_verified"].(type) {
	case bool:
		id.EmailUnverified = !v
	case string:
		id.EmailUnverified = v == strconv.FormatBool(false)
	}
	groups, found := claims[p.cfg.GroupsClaim]
	id.GroupsFound = found
	switch v := groups.(type) {
	case nil:
	case string:
		id.Groups = []string{v}
	case []any:
		for _, g := range v {
			s, ok := g.(string)
			if !ok {
				return Identity{}, fmt.Errorf("the claim %s is not a list of strings", p.cfg.GroupsClaim)
			}
			id.Groups = append(id.Groups, s)
		}
	default:
		return Identity{}, fmt.Errorf("the claim %s is not a list of strings", p.cfg.GroupsClaim)
	}
	return id, nil
}

// Refusal is the provider vouching for someone hookd does not let in, with
// the reason to show them.
type Refusal struct {
	Reason string
}

func (r *Refusal) Error() string { return r.Reason }

// Role decides whether id may sign in and with which role: an unverified
// email is refused, and so are groups that map to no role.
func (p *Provider) Role(id Identity) (accounts.Role, error) {
	if id.EmailUnverified {
		return "", &Refusal{Reason: fmt.Sprintf("The identity provider says the email %s is not verified "+
			"(email_verified is false). Verify it there, then sign in again.", id.Email)}
	}
	role, ok := p.cfg.Roles.For(id.Groups)
	if ok {
		return role, nil
	}
	var read string
	switch {
	case !id.GroupsFound:
		read = fmt.Sprintf("hookd read the claim %q, which the provider did not send", p.cfg.GroupsClaim)
	case len(id.Groups) == 0:
		read = fmt.Sprintf("hookd read the claim %q, which lists no group", p.cfg.GroupsClaim)
	default:
		read = fmt.Sprintf("hookd read the claim %q: %s", p.cfg.GroupsClaim, strings.Join(slices.Sorted(slices.Values(id.Groups)), ", "))
	}
	// The mapping itself is not shown: it is the deployment's, not for
	// everyone the provider knows.
	return "", &Refusal{Reason: fmt.Sprintf("Your groups give no role in hookd (%s). "+
		"Ask whoever runs hookd which group lets you in.", read)}
}

// exchangeError keeps what the provider said of a refused code, and
// nothing of the request.
func exchangeError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.ErrorCode != "" {
			return fmt.Errorf("%s %s", re.ErrorCode, re.ErrorDescription)
		}
		return fmt.Errorf("HTTP %d", re.Response.StatusCode)
	}
	return err
}
