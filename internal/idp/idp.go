// Package idp signs people in through the company's identity provider with
// OpenID Connect: the authorization-code flow with PKCE, state and nonce
// (the state's single use and its tie to the browser are the dashboard's),
// the ID token's checks (signature against the provider's current keys,
// issuer, audience, expiry with a minute of clock skew, nonce), the claims
// hookd reads from the token and, for what the token leaves out, from the
// userinfo endpoint, who is let in (the groups mapped to hookd's roles, and
// the email domains allowed), the re-check of a signed-in person with a
// refresh token, and sign-out at the provider.
//
// It keeps no token: Finish and Recheck hand the refresh token and the ID
// token to the caller, which keeps them (the refresh token encrypted) or
// drops them.
package idp

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
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

// SignedOutPath is where the provider sends the browser back after a
// sign-out there: register HOOKD_PUBLIC_URL with this path as a post
// logout redirect URI of hookd's client.
const SignedOutPath = "/auth/oidc/signed-out"

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
	// AllowedDomains is HOOKD_OIDC_ALLOWED_DOMAINS: when set, only a
	// verified email of one of these domains signs in (and, from Google,
	// only an account whose hd claim is one of them).
	AllowedDomains []string
	// Offline asks for a refresh token (the offline_access scope; Google's
	// access_type=offline), with which Recheck asks the provider again
	// about a signed-in person.
	Offline bool
	// HTTPClient reaches the provider. Default: a client with a 10 s
	// timeout.
	HTTPClient *http.Client
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// ClockSkew is how far the provider's clock, or another replica's, may be
// from this one's: a token expired less than this long ago, and a sign-in
// another replica started up to this far in its future, are accepted.
const ClockSkew = time.Minute

// Discovery's timings: a failed read of the discovery document is
// answered from memory for discoveryRetry, so requests do not queue
// behind a provider that is down; a read one is used for discoveryRefresh,
// then read again (in the background: the old one serves meanwhile).
const (
	discoveryRetry   = 30 * time.Second
	discoveryRefresh = 24 * time.Hour
)

// CheckIssuer refuses an issuer that is not an https URL, unless it is on
// this host (localhost, a loopback address): over plain HTTP anyone on the
// way could swap the provider's keys and sign in as anyone.
func CheckIssuer(issuer string) error {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not a URL", issuer)
	}
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%q is not https: over plain HTTP anyone on the way could sign in as anyone "+
		"(http is taken for localhost and loopback addresses alone)", issuer)
}

// Origin returns the scheme and host of rawURL, "" when it is not a URL.
func Origin(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Provider is the identity provider, discovered on first use: hookd
// starts, and receives webhooks, while the provider is down.
type Provider struct {
	cfg Config

	mu         sync.Mutex
	discovered *discovered
	readAt     time.Time
	// failed is the last read's error, until failedAt + discoveryRetry.
	failed   error
	failedAt time.Time
	// reading is closed when the read under way ends; nil when none is.
	reading chan struct{}
}

type discovered struct {
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
	oauth    oauth2.Config
	// endSession is the provider's end_session_endpoint, "" without one.
	endSession string
	userinfo   bool
}

// New returns the provider cfg describes. It reaches nothing yet.
func New(cfg Config) *Provider {
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = DefaultGroupsClaim
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Provider{cfg: cfg}
}

// Issuer returns HOOKD_OIDC_ISSUER.
func (p *Provider) Issuer() string { return p.cfg.Issuer }

// GroupsClaim returns the claim the groups are read from.
func (p *Provider) GroupsClaim() string { return p.cfg.GroupsClaim }

// Offline reports whether sign-ins ask for a refresh token to re-check
// the person with.
func (p *Provider) Offline() bool { return p.cfg.Offline }

func (p *Provider) clientContext(ctx context.Context) context.Context {
	return oidc.ClientContext(ctx, p.cfg.HTTPClient)
}

// discover returns the provider's discovery document. One read runs at a
// time, whoever asks: every request waits for the same read (or for its
// own context), none holds a lock while the provider is slow, and a read
// that failed is answered from memory for discoveryRetry. A document
// older than discoveryRefresh is read again in the background while the
// old one serves. The key set it makes fetches the provider's keys again
// when a token is signed with a key it does not know, so a rotated key is
// picked up at the next sign-in.
func (p *Provider) discover(ctx context.Context) (*discovered, error) {
	for {
		p.mu.Lock()
		now := p.cfg.Now()
		d := p.discovered
		switch {
		case d != nil && (now.Sub(p.readAt) < discoveryRefresh || p.reading != nil ||
			p.failed != nil && now.Sub(p.failedAt) < discoveryRetry):
			p.mu.Unlock()
			return d, nil
		case d == nil && p.reading == nil && p.failed != nil && now.Sub(p.failedAt) < discoveryRetry:
			err := p.failed
			p.mu.Unlock()
			return nil, err
		}
		if p.reading == nil {
			p.reading = make(chan struct{})
			go p.read(p.reading)
		}
		reading := p.reading
		p.mu.Unlock()
		if d != nil {
			return d, nil
		}
		select {
		case <-reading:
		case <-ctx.Done():
			return nil, fmt.Errorf("read the discovery document of %s: %w", p.cfg.Issuer, ctx.Err())
		}
	}
}

// read reads the discovery document once, bounded by the HTTP client's
// timeout alone: no request's deadline, as every request waiting shares it,
// and the key set keeps its context for later fetches.
func (p *Provider) read(done chan struct{}) {
	d, err := p.readDocument(p.clientContext(context.Background()))
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.failed, p.failedAt = err, p.cfg.Now()
	} else {
		p.discovered, p.readAt, p.failed = d, p.cfg.Now(), nil
	}
	p.reading = nil
	close(done)
}

func (p *Provider) readDocument(ctx context.Context) (*discovered, error) {
	provider, err := oidc.NewProvider(ctx, p.cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("read the discovery document of %s: %w", p.cfg.Issuer, err)
	}
	var endpoints struct {
		EndSession string   `json:"end_session_endpoint"`
		Userinfo   string   `json:"userinfo_endpoint"`
		Scopes     []string `json:"scopes_supported"`
	}
	if err := provider.Claims(&endpoints); err != nil {
		return nil, fmt.Errorf("read the discovery document of %s: %w", p.cfg.Issuer, err)
	}
	// The provider's clock, or this host's, may be up to ClockSkew off: a
	// token is taken until ClockSkew after its expiry.
	now := func() time.Time { return p.cfg.Now().Add(-ClockSkew) }
	return &discovered{
		provider: provider,
		verifier: provider.Verifier(&oidc.Config{ClientID: p.cfg.ClientID, Now: now}),
		oauth: oauth2.Config{
			ClientID:     p.cfg.ClientID,
			ClientSecret: p.cfg.ClientSecret,
			RedirectURL:  p.cfg.RedirectURL,
			Endpoint:     provider.Endpoint(),
			Scopes:       p.scopes(endpoints.Scopes),
		},
		endSession: endpoints.EndSession,
		userinfo:   endpoints.Userinfo != "",
	}, nil
}

// isGoogle reports whether the provider is Google's, which asks for a
// refresh token with access_type=offline rather than a scope.
func (p *Provider) isGoogle() bool {
	return strings.TrimRight(p.cfg.Issuer, "/") == "https://accounts.google.com"
}

// scopes asks for the ID token, the email and profile claims, and a scope
// named like the groups claim unless a standard scope carries it: that is
// how Okta, Keycloak (a client scope named groups) and most others are set
// up to send groups. Providers leave out scopes they do not know.
//
// With Config.Offline it asks for offline_access too, unless the provider
// lists the scopes it supports without it (some refuse a scope they do not
// know) or is Google's, which asks otherwise (Start).
func (p *Provider) scopes(supported []string) []string {
	scopes := []string{oidc.ScopeOpenID, "email", "profile"}
	if p.cfg.Offline && !p.isGoogle() && (len(supported) == 0 || slices.Contains(supported, oidc.ScopeOfflineAccess)) {
		scopes = append(scopes, oidc.ScopeOfflineAccess)
	}
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
	opts := []oauth2.AuthCodeOption{oidc.Nonce(s.Nonce), oauth2.S256ChallengeOption(s.Verifier)}
	if p.cfg.Offline && p.isGoogle() {
		// Google gives a refresh token only at a consent screen.
		opts = append(opts, oauth2.AccessTypeOffline, oauth2.SetAuthURLParam("prompt", "consent"))
	}
	s.URL = d.oauth.AuthCodeURL(s.State, opts...)
	return s, nil
}

// Identity is who the provider vouched for, and what hookd reads of them.
type Identity struct {
	Issuer  string
	Subject string
	// Email is what the pages show: the email claim, else
	// preferred_username, else the subject.
	Email string
	// EmailClaim is the email claim alone, "" without one; EmailVerified
	// is set when the provider says email_verified true, EmailUnverified
	// when it says false (neither when it says nothing).
	EmailClaim      string
	EmailVerified   bool
	EmailUnverified bool
	// HostedDomain is Google's hd claim: the Workspace domain of the
	// account, "" for a personal one.
	HostedDomain string
	// Groups are the groups claim's values; GroupsFound says whether the
	// claim was there at all.
	Groups      []string
	GroupsFound bool
	// Tokens are what the provider gave with this identity, for the
	// caller to keep or drop.
	Tokens Tokens
}

// Tokens are a sign-in's tokens that outlive it: the refresh token
// (Config.Offline), and the raw ID token, which the provider's
// end_session_endpoint takes as the hint of whose session to end.
type Tokens struct {
	Refresh string
	ID      string
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
	id, err := p.identity(idToken.Issuer, idToken.Subject, claims)
	id.Tokens = Tokens{Refresh: token.RefreshToken, ID: raw}
	return id, err
}

// ErrRefreshRefused is Recheck's error when the provider refuses the
// refresh token (invalid_grant): it no longer vouches for the person's
// earlier sign-in, revoked or expired, and they must sign in again.
var ErrRefreshRefused = errors.New("the identity provider refused the refresh token")

// Recheck asks the provider about a signed-in person again, with the
// refresh token of their sign-in, and returns who they are now (with the
// new refresh token when the provider rotates it). The claims are those
// of the new ID token, filled in from the userinfo endpoint like
// Finish's; the subject must be subject. It fails with ErrRefreshRefused
// when the provider refuses the token, and with another error when the
// provider could not be asked, which says nothing about the person.
func (p *Provider) Recheck(ctx context.Context, refreshToken, subject string) (Identity, error) {
	d, err := p.discover(ctx)
	if err != nil {
		return Identity{}, err
	}
	ctx = p.clientContext(ctx)
	token, err := d.oauth.TokenSource(ctx, &oauth2.Token{RefreshToken: refreshToken}).Token()
	if re, ok := errors.AsType[*oauth2.RetrieveError](err); ok && re.ErrorCode == "invalid_grant" {
		return Identity{}, fmt.Errorf("%w: %s", ErrRefreshRefused, exchangeError(err))
	}
	if err != nil {
		return Identity{}, fmt.Errorf("refresh the sign-in: %w", exchangeError(err))
	}
	claims := map[string]any{}
	issuer := p.cfg.Issuer
	raw, _ := token.Extra("id_token").(string)
	if raw != "" {
		idToken, err := d.verifier.Verify(ctx, raw)
		if err != nil {
			return Identity{}, fmt.Errorf("the refreshed ID token is not valid: %w", err)
		}
		if idToken.Subject != subject {
			return Identity{}, errors.New("the refreshed ID token names another subject")
		}
		if err := idToken.Claims(&claims); err != nil {
			return Identity{}, fmt.Errorf("read the refreshed ID token's claims: %w", err)
		}
		issuer = idToken.Issuer
	}
	if err := p.addUserinfo(ctx, d, token, subject, claims); err != nil {
		return Identity{}, err
	}
	if raw == "" && len(claims) == 0 {
		return Identity{}, errors.New("the provider's refresh gave neither an ID token nor a userinfo endpoint to read")
	}
	id, err := p.identity(issuer, subject, claims)
	id.Tokens = Tokens{Refresh: cmp.Or(token.RefreshToken, refreshToken), ID: raw}
	return id, err
}

// EndSessionURL returns where to send the browser to sign out at the
// provider too (RP-initiated logout), back to postLogout afterwards, or
// false when the provider has no end_session_endpoint or cannot be read.
// idTokenHint names the session to end.
func (p *Provider) EndSessionURL(ctx context.Context, idTokenHint, postLogout string) (string, bool) {
	d, err := p.discover(ctx)
	if err != nil || d.endSession == "" {
		return "", false
	}
	// The dashboard's pages let their forms' redirects reach the issuer's
	// origin alone (form-action): an endpoint elsewhere would be blocked.
	u, err := url.Parse(d.endSession)
	if err != nil || Origin(d.endSession) != Origin(p.cfg.Issuer) {
		return "", false
	}
	q := u.Query()
	if idTokenHint != "" {
		q.Set("id_token_hint", idTokenHint)
	}
	q.Set("client_id", p.cfg.ClientID)
	q.Set("post_logout_redirect_uri", postLogout)
	u.RawQuery = q.Encode()
	return u.String(), true
}

func (p *Provider) addUserinfo(ctx context.Context, d *discovered, token *oauth2.Token, subject string, claims map[string]any) error {
	if !d.userinfo {
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
		id.EmailVerified, id.EmailUnverified = v, !v
	case string:
		id.EmailVerified, id.EmailUnverified = v == strconv.FormatBool(true), v == strconv.FormatBool(false)
	}
	if s, ok := claims["email"].(string); ok {
		id.EmailClaim = strings.TrimSpace(s)
	}
	if s, ok := claims["hd"].(string); ok {
		id.HostedDomain = strings.ToLower(strings.TrimSpace(s))
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
	if reason := p.outsideDomains(id); reason != "" {
		return "", &Refusal{Reason: reason}
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

// outsideDomains says why id is refused by HOOKD_OIDC_ALLOWED_DOMAINS, or
// "" when the setting lets id in (or is not set).
func (p *Provider) outsideDomains(id Identity) string {
	allowed := p.cfg.AllowedDomains
	if len(allowed) == 0 {
		return ""
	}
	const limited = "Sign-in here is limited to the verified emails of the company's domains"
	_, domain, _ := strings.Cut(strings.ToLower(id.EmailClaim), "@")
	switch {
	case id.EmailClaim == "":
		return limited + ", and the identity provider sent no email for you."
	case !id.EmailVerified:
		return fmt.Sprintf("%s, and the identity provider does not say your email %s is verified.", limited, id.EmailClaim)
	case !slices.Contains(allowed, domain):
		return fmt.Sprintf("%s, and %s is not one of them. Sign in with your company account.", limited, id.EmailClaim)
	case id.HostedDomain != "" && !slices.Contains(allowed, id.HostedDomain) || p.isGoogle() && id.HostedDomain == "":
		return fmt.Sprintf("%s, and your Google account is not one of the company's Workspace (its hd is %q). "+
			"Sign in with your company account.", limited, id.HostedDomain)
	}
	return ""
}

// ParseDomains reads HOOKD_OIDC_ALLOWED_DOMAINS: email domains separated
// by commas, compared without case.
func ParseDomains(s string) ([]string, error) {
	var domains []string
	for d := range strings.SplitSeq(s, ",") {
		d = strings.ToLower(strings.TrimSpace(d))
		if d == "" {
			continue
		}
		if strings.ContainsAny(d, "@/: ") || !strings.Contains(d, ".") {
			return nil, fmt.Errorf("%q is not an email domain, e.g. example.com", d)
		}
		domains = append(domains, d)
	}
	return domains, nil
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
