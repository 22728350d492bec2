package destinations

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// canonical is a destination as its hash sees it: every setting, and the
// names of the variables it reads, never their values (the secrets and
// the headers' credentials). A destination given its values (an Entry)
// has their own SHA-256 instead, so that a new secret is a new hash.
type canonical struct {
	Accounts         []string          `json:"accounts"`
	Concurrency      int               `json:"concurrency"`
	Endpoints        []string          `json:"endpoints"`
	Filter           string            `json:"filter"`
	HeadersEnv       map[string]string `json:"headers_env"`
	Livemode         string            `json:"livemode"`
	Name             string            `json:"name"`
	OrderBy          string            `json:"order_by"`
	Rate             float64           `json:"rate"`
	Secrets          string            `json:"secrets,omitempty"`
	SigningSecretEnv string            `json:"signing_secret_env"`
	TimeoutNanos     int64             `json:"timeout_ns"`
	Types            []string          `json:"types"`
	URL              string            `json:"url"`
}

// hash is the hex SHA-256 of the set's canonical JSON: its destinations
// in order, each with its defaults filled in and its keys sorted
// (canonical's fields are in order, and encoding/json sorts a map's), so
// the same file always gives the same hash, whatever its layout and
// comments.
func hash(s *Set) string {
	all := make([]canonical, len(s.Destinations))
	for i, d := range s.Destinations {
		all[i] = canonical{Accounts: d.Accounts, Concurrency: d.Concurrency, Endpoints: d.Endpoints,
			Filter: d.Filter, HeadersEnv: d.HeadersEnv, Livemode: d.Livemode, Name: d.Name, OrderBy: d.OrderBy,
			Rate: d.Rate, Secrets: valuesHash(d), SigningSecretEnv: d.SigningSecretEnv, TimeoutNanos: int64(d.Timeout), Types: d.Types, URL: d.URL}
	}
	b, err := json.Marshal(struct {
		Destinations []canonical `json:"destinations"`
		Source       string      `json:"source"`
	}{all, s.Source})
	if err != nil {
		// Strings, numbers and maps of strings always marshal.
		panic(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// valuesHash is the hex SHA-256 of the secrets and headers of a
// destination given as values, "" for one that read them from variables.
func valuesHash(d *Destination) string {
	if !d.valued || (len(d.SigningSecrets) == 0 && len(d.Headers) == 0) {
		return ""
	}
	b, err := json.Marshal(struct {
		Secrets []string            `json:"secrets"`
		Headers map[string][]string `json:"headers"`
	}{d.SigningSecrets, d.Headers})
	if err != nil {
		panic(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
