package stripetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/hookd/hookd/internal/stripeevent"
)

// ObjectURL is the path the API serves the object of type objectType with
// id at, as a thin event's related_object.url names it; "" for a type
// stripeevent.ObjectPaths does not know.
func ObjectURL(objectType, id string) string {
	p, ok := stripeevent.ObjectPaths[objectType]
	if !ok {
		return ""
	}
	return p + id
}

// objectKey finds a stored object: the account it lives in ("" for the
// account's own) and its path.
type objectKey struct{ account, path string }

// PutObject makes the API serve object (its "id" and "object" name it) as
// it is now, in account ("" for the account's own): the state "Show it in
// Stripe now" fetches, which may differ from an event's snapshot.
func (s *Server) PutObject(account string, object map[string]any) {
	raw, err := json.Marshal(object)
	if err != nil {
		panic(err) // only plain values go in
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putObjectLocked(account, object, raw, true)
}

// putObjectLocked stores object under its path; an event's snapshot does
// not replace what PutObject put (replace false).
func (s *Server) putObjectLocked(account string, object map[string]any, raw []byte, replace bool) {
	id, _ := object["id"].(string)
	typ, _ := object["object"].(string)
	path := ObjectURL(typ, id)
	if path == "" || id == "" {
		return
	}
	key := objectKey{account, path}
	if _, ok := s.objects[key]; ok && !replace {
		return
	}
	s.objects[key] = raw
}

// object answers GET of an object's path, in account's objects.
func (s *Server) object(w http.ResponseWriter, path, account string) {
	if raw, ok := s.objects[objectKey{account, path}]; ok {
		_, _ = w.Write(raw)
		return
	}
	for typ, prefix := range stripeevent.ObjectPaths {
		if id, ok := strings.CutPrefix(path, prefix); ok && id != "" && !strings.Contains(id, "/") {
			writeError(w, http.StatusNotFound, "resource_missing",
				fmt.Sprintf("No such %s: '%s'", strings.ReplaceAll(typ, "_", ""), id), "id")
			return
		}
	}
	writeError(w, http.StatusNotFound, "", "Unrecognized request URL (GET: "+path+").", "")
}
