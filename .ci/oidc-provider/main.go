// Command hookd-oidc-provider is the OpenID provider hookd's end-to-end
// tests sign in through: ZITADEL's example provider (the example/server
// of github.com/zitadel/oidc, its fixed users and in-memory storage), with
// three things a real provider has and the example lacks:
//
//   - a groups claim in the userinfo answer, which the test changes while
//     the provider runs (POST /admin/groups), as an administrator removes
//     a leaver from a group;
//   - a sign-in session: once a browser has signed in, the provider's next
//     authorization request from it asks for no password, as Keycloak,
//     Okta or Entra ID do;
//   - RP-initiated logout that ends that session: end_session_endpoint
//     forgets the browser, and sends it back to a post logout redirect URI
//     (POST_LOGOUT_REDIRECT_URI) registered for the web client.
//
// Settings, from the environment: PORT (9998), REDIRECT_URI and
// POST_LOGOUT_REDIRECT_URI (comma-separated), GROUPS (user=group|group;...,
// by username). Its issuer is http://localhost:PORT/. It listens on the
// loopback address alone: /admin/groups has no authentication.
package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

func main() {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	port := env("PORT", "9998")
	issuer := "http://localhost:" + port + "/"
	postLogout := split(os.Getenv("POST_LOGOUT_REDIRECT_URI"), ",")
	storage.RegisterClients(storage.WebClient("web", "secret", split(os.Getenv("REDIRECT_URI"), ",")...))

	users := storage.NewUserStore(issuer)
	groups := &groupTable{byUser: map[string][]string{}}
	for pair := range strings.SplitSeq(os.Getenv("GROUPS"), ";") {
		if user, list, ok := strings.Cut(pair, "="); ok {
			groups.set(user, split(list, "|"))
		}
	}
	st := &store{Storage: storage.NewStorage(users), users: users, groups: groups, postLogout: postLogout}
	provider, err := op.NewProvider(&op.Config{
		CryptoKey:                sha256.Sum256([]byte("hookd e2e")),
		DefaultLogoutRedirectURI: "/logged-out",
		CodeMethodS256:           true,
		AuthMethodPost:           true,
		GrantTypeRefreshToken:    true,
		SupportedUILocales:       []language.Tag{language.English},
	}, st, op.StaticIssuer(issuer), op.WithAllowInsecure(), op.WithCustomAuthEndpoint(op.NewEndpoint("auth")))
	if err != nil {
		logger.Error("start the provider", "err", err)
		os.Exit(1)
	}
	sessions := &sessionTable{byID: map[string]string{}}
	l := &login{store: st, sessions: sessions, callback: op.AuthCallbackURL(provider)}
	intercept := op.NewIssuerInterceptor(provider.IssuerFromRequest)

	router := chi.NewRouter()
	router.Use(logRequests(logger))
	router.Get("/login/username", intercept.HandlerFunc(l.page))
	router.Post("/login/username", intercept.HandlerFunc(l.check))
	router.Post("/admin/groups", groups.handle)
	router.Get("/logged-out", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("signed out")) })
	// Ending the provider's session forgets the browser's sign-in, once
	// the request was valid (the provider redirects).
	router.Handle("/end_session", sessions.endOnRedirect(provider))
	router.Mount("/", provider)

	logger.Info("listening", "issuer", issuer)
	if err := http.ListenAndServe("127.0.0.1:"+port, router); err != nil {
		logger.Error("serve", "err", err)
		os.Exit(1)
	}
}

// logRequests logs each request's method, path and status, for the log a
// failed test keeps.
func logRequests(logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := &status{ResponseWriter: w, code: http.StatusOK}
			next.ServeHTTP(rec, r)
			logger.Info("request", "method", r.Method, "path", r.URL.Path, "status", rec.code, "location", w.Header().Get("Location"))
		})
	}
}

type status struct {
	http.ResponseWriter
	code int
}

func (s *status) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func split(s, sep string) []string {
	var out []string
	for v := range strings.SplitSeq(s, sep) {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// store is the example's storage with a groups claim, and post logout
// redirect URIs for its clients.
type store struct {
	*storage.Storage
	users      storage.UserStore
	groups     *groupTable
	postLogout []string
}

// SetUserinfoFromToken answers the userinfo endpoint: the example's
// claims, and the groups the table gives the user now.
func (s *store) SetUserinfoFromToken(ctx context.Context, info *oidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, info, tokenID, subject, origin); err != nil {
		return err
	}
	s.addGroups(info, subject)
	return nil
}

// SetUserinfoFromRequest makes the ID token's claims: the groups as well.
func (s *store) SetUserinfoFromRequest(ctx context.Context, info *oidc.UserInfo, token op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, info, token, scopes); err != nil {
		return err
	}
	s.addGroups(info, token.GetSubject())
	return nil
}

func (s *store) addGroups(info *oidc.UserInfo, subject string) {
	if u := s.users.GetUserByID(subject); u != nil {
		info.AppendClaims("groups", s.groups.of(u.Username))
	}
}

// GetClientByClientID gives each client the post logout redirect URIs.
func (s *store) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return client{Client: c, postLogout: s.postLogout}, nil
}

type client struct {
	op.Client
	postLogout []string
}

func (c client) PostLogoutRedirectURIs() []string { return c.postLogout }

// groupTable is each user's groups, by username.
type groupTable struct {
	mu     sync.Mutex
	byUser map[string][]string
}

func (g *groupTable) set(user string, groups []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.byUser[user] = groups
}

func (g *groupTable) of(user string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string{}, g.byUser[user]...)
}

// handle sets a user's groups: user=test-user2&groups=a|b (none for an
// empty value).
func (g *groupTable) handle(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.PostForm.Get("user") == "" {
		http.Error(w, "want user=...&groups=a|b", http.StatusBadRequest)
		return
	}
	g.set(r.PostForm.Get("user"), split(r.PostForm.Get("groups"), "|"))
	w.WriteHeader(http.StatusNoContent)
}

// sessionTable is the browsers signed in at the provider: a cookie's
// random id to the user's id.
type sessionTable struct {
	mu   sync.Mutex
	byID map[string]string
}

const sessionCookie = "op_session"

func (s *sessionTable) user(r *http.Request) string {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byID[c.Value]
}

func (s *sessionTable) start(w http.ResponseWriter, userID string) {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	id := base64.RawURLEncoding.EncodeToString(b)
	s.mu.Lock()
	s.byID[id] = userID
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
}

// endOnRedirect runs the provider's end_session endpoint and, when it
// accepted the request (it redirects), forgets the browser's session.
func (s *sessionTable) endOnRedirect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&ending{ResponseWriter: w, end: func() {
			if c, err := r.Cookie(sessionCookie); err == nil {
				s.mu.Lock()
				delete(s.byID, c.Value)
				s.mu.Unlock()
			}
			http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: "/", MaxAge: -1})
		}}, r)
	})
}

type ending struct {
	http.ResponseWriter
	end func()
}

func (e *ending) WriteHeader(status int) {
	if status == http.StatusFound {
		e.end()
	}
	e.ResponseWriter.WriteHeader(status)
}

// login is the sign-in page: the form of the example, skipped for a
// browser with a session.
type login struct {
	store    *store
	sessions *sessionTable
	callback func(context.Context, string) string
}

var form = template.Must(template.New("login").Parse(`<!DOCTYPE html>
<html><head><meta charset="UTF-8"><title>Login</title></head>
<body><form method="POST" action="/login/username">
<input type="hidden" name="id" value="{{.ID}}">
<div><label for="username">Username:</label><input id="username" name="username" autocomplete="username"></div>
<div><label for="password">Password:</label><input id="password" name="password" type="password" autocomplete="current-password"></div>
<p>{{.Error}}</p>
<button type="submit">Login</button>
</form></body></html>`))

func (l *login) page(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("authRequestID")
	if userID := l.sessions.user(r); userID != "" {
		if u := l.store.users.GetUserByID(userID); u != nil && l.store.CheckUsernamePassword(u.Username, u.Password, id) == nil {
			http.Redirect(w, r, l.callback(r.Context(), id), http.StatusFound)
			return
		}
	}
	_ = form.Execute(w, map[string]string{"ID": id})
}

func (l *login) check(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id, username := r.FormValue("id"), r.FormValue("username")
	if err := l.store.CheckUsernamePassword(username, r.FormValue("password"), id); err != nil {
		w.WriteHeader(http.StatusUnauthorized)
		_ = form.Execute(w, map[string]string{"ID": id, "Error": err.Error()})
		return
	}
	l.sessions.start(w, l.store.users.GetUserByUsername(username).ID)
	http.Redirect(w, r, l.callback(r.Context(), id), http.StatusFound)
}
