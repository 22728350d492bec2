package web_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"

	"github.com/hookd/hookd/internal/store/accounts"
	"github.com/hookd/hookd/internal/stripeevent"
	"github.com/hookd/hookd/web"
)

// apiFace is the API operation that does what a dashboard route does, by
// its operationId in web/api/openapi.yaml, and the dashboard role the
// route needs, whose scope the operation must need too.
type apiFace struct {
	operation string
	role      accounts.Role
}

// dashboardToAPI maps every dashboard POST route to its API operation: one
// action, two faces. A preview is the operation with dry_run.
var dashboardToAPI = map[string]apiFace{
	"/prune/preview":                      {"pruneRedeliveryGuard", accounts.RoleAdmin},
	"/prune":                              {"pruneRedeliveryGuard", accounts.RoleAdmin},
	"/erase":                              {"eraseCustomer", accounts.RoleAdmin},
	"/events/:id/stripe":                  {"getEventInStripe", accounts.RoleViewer}, // a read; a POST on the dashboard so that no prefetch spends Stripe's budget
	"/events/:id/retry":                   {"retryEvent", accounts.RoleOperator},
	"/events/:id/retry-now":               {"retryEventNow", accounts.RoleOperator},
	"/events/retry-all/preview":           {"retryDeadEvents", accounts.RoleOperator},
	"/events/retry-all":                   {"retryDeadEvents", accounts.RoleOperator},
	"/reconcile/preview":                  {"reconcile", accounts.RoleOperator},
	"/reconcile":                          {"reconcile", accounts.RoleOperator},
	"/events/pull":                        {"pullEvent", accounts.RoleOperator},
	"/delivery/pause":                     {"pauseDelivery", accounts.RoleOperator},
	"/delivery/resume":                    {"resumeDelivery", accounts.RoleOperator},
	"/destinations/:name/pause":           {"pauseDestination", accounts.RoleOperator},
	"/destinations/:name/resume":          {"resumeDestination", accounts.RoleOperator},
	"/destinations/:name/move":            {"moveDeliveries", accounts.RoleOperator},
	"/destinations/:name/drop":            {"dropDeliveries", accounts.RoleOperator},
	"/destinations/:name/release/preview": {"releaseHeldKey", accounts.RoleOperator},
	"/destinations/:name/release":         {"releaseHeldKey", accounts.RoleOperator},
	"/replays/preview":                    {"createReplay", accounts.RoleOperator},
	"/replays":                            {"createReplay", accounts.RoleOperator},
	"/replays/:id/cancel":                 {"cancelReplay", accounts.RoleOperator},
	"/failures/retry/preview":             {"retryFailureGroup", accounts.RoleOperator},
	"/failures/retry":                     {"retryFailureGroup", accounts.RoleOperator},
	"/accounts":                           {"addAccount", accounts.RoleAdmin},
	"/accounts/:id/role":                  {"setAccountRole", accounts.RoleAdmin},
	"/accounts/:id/remove/preview":        {"removeAccount", accounts.RoleAdmin},
	"/accounts/:id/remove":                {"removeAccount", accounts.RoleAdmin},
	"/accounts/:id/sessions/end":          {"endAccountSessions", accounts.RoleAdmin},
	// The confirmation names the token; the API's list of tokens does.
	"/accounts/:id/tokens/:token/revoke/preview": {"listTokens", accounts.RoleAdmin},
	"/accounts/:id/tokens/:token/revoke":         {"revokeToken", accounts.RoleAdmin},
	"/destinations/add":                          {"addDestination", accounts.RoleAdmin},
	"/destinations/:name/edit":                   {"editDestination", accounts.RoleAdmin},
	"/destinations/:name/remove/preview":         {"removeDestination", accounts.RoleAdmin},
	"/destinations/:name/remove":                 {"removeDestination", accounts.RoleAdmin},
}

// exemptFromAPI are the POST routes with no meaning over the API, each
// with why.
var exemptFromAPI = map[string]string{
	"/login":  "signing in makes a dashboard session; the API takes a bearer token and never a session",
	"/logout": "signing out ends a dashboard session, which the API never uses",
	"/accounts/:id/tokens": "a token's secret is shown once, to a person: on the Accounts page, or on the server's " +
		"stdout (hookd tokens create, which makes the first); the API mints no token, so a token cannot make more",
	stripeevent.ReceiverPath: "Stripe's deliveries to the receiver, not an action of the dashboard",
}

// scopeOf is the token scope an operation must need for a route of role.
var scopeOf = map[accounts.Role]string{accounts.RoleViewer: "read", accounts.RoleOperator: "operate", accounts.RoleAdmin: "admin"}

// Every POST route the dashboard registers has an operation of the API
// that does the same, needing the scope of the route's role, or is exempt
// with its reason; and neither list names a route that is gone, or an
// operation the document lacks.
func TestAPI_EveryDashboardPostHasAnOperation(t *testing.T) {
	t.Parallel()
	e, ok := web.NewServer(web.Options{}).(*echo.Echo)
	if !ok {
		t.Fatal("web.NewServer does not return an *echo.Echo; this test walks its routes")
	}
	doc, err := openapi3.NewLoader().LoadFromFile("api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	scopes := map[string]string{}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			scopes[op.OperationID], _ = op.Extensions["x-hookd-scope"].(string)
		}
	}
	var posts []string
	for _, r := range e.Routes() {
		if r.Method == http.MethodPost && !slices.Contains(posts, r.Path) {
			posts = append(posts, r.Path)
		}
	}
	for _, path := range posts {
		face, mapped := dashboardToAPI[path]
		_, exempt := exemptFromAPI[path]
		switch {
		case mapped && exempt:
			t.Errorf("POST %s is both mapped to %s and exempt", path, face.operation)
		case !mapped && !exempt:
			t.Errorf("POST %s, a dashboard action, has no API operation: add one to web/api/openapi.yaml and map it here, "+
				"or exempt it with the reason it means nothing over the API", path)
		case mapped && scopes[face.operation] == "":
			t.Errorf("POST %s maps to %s, which web/api/openapi.yaml does not have", path, face.operation)
		case mapped && scopes[face.operation] != scopeOf[face.role]:
			t.Errorf("POST %s needs a dashboard %s; its operation %s needs the %q scope, want %q",
				path, face.role, face.operation, scopes[face.operation], scopeOf[face.role])
		}
	}
	for path := range dashboardToAPI {
		if !slices.Contains(posts, path) {
			t.Errorf("the mapping names POST %s, which the dashboard no longer registers", path)
		}
	}
	for path := range exemptFromAPI {
		if !slices.Contains(posts, path) {
			t.Errorf("the exempt list names POST %s, which the dashboard no longer registers", path)
		}
	}
}

// The roles the mapping gives are the roles the dashboard's routes
// enforce: a session of the role below each is refused 403, and one of
// the role itself gets past the check (to the handler, which finds no such
// event, replay or account, or an empty form, and changes nothing).
func TestAPI_TheMappingsRolesAreTheRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sessions := map[accounts.Role]*client{}
	for _, role := range []accounts.Role{accounts.RoleViewer, accounts.RoleOperator, accounts.RoleAdmin} {
		sessions[role] = b.client(t)
		sessions[role].signIn(role)
	}
	below := map[accounts.Role]accounts.Role{accounts.RoleOperator: accounts.RoleViewer, accounts.RoleAdmin: accounts.RoleOperator}
	for route, face := range dashboardToAPI {
		path := strings.NewReplacer(":id", "999999", ":token", "999999").Replace(route)
		if strings.HasPrefix(route, "/events/:id") {
			path = strings.Replace(route, ":id", "evt_1NoSuchEvent", 1)
		}
		if lower, ok := below[face.role]; ok {
			if r := sessions[lower].post(path, nil); r.status != http.StatusForbidden {
				t.Errorf("POST %s as %s: status %d, want 403: the mapping says it needs %s", route, lower, r.status, face.role)
			}
		}
		if r := sessions[face.role].post(path, nil); r.status == http.StatusForbidden || r.status == http.StatusSeeOther &&
			strings.HasPrefix(r.header.Get("Location"), "/login") {
			t.Errorf("POST %s as %s: status %d (%s), want it past the role check", route, face.role, r.status, r.header.Get("Location"))
		}
	}
}
