// Package forwardsig is the Standard Webhooks signature hookd puts on every
// event it forwards when a secret is set (HOOKD_FORWARD_SECRET): the secret's
// format, the headers hookd sends, under one key or several while a secret is
// rotated, and the check an app makes (the demo app's). One package, so the
// sender and the checker cannot disagree.
package forwardsig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers a signed delivery carries.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// ParseSecret decodes a whsec_<base64> secret into its key. The empty
// secret is no secret: a nil key, and deliveries go unsigned.
func ParseSecret(secret string) ([]byte, error) {
	if secret == "" {
		return nil, nil
	}
	rest, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return nil, errors.New("must look like whsec_<base64>")
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(key) == 0 {
		return nil, errors.New("the part after whsec_ is not valid base64")
	}
	return key, nil
}

// Sign sets the signature headers of a delivery of body, whose id is id,
// signed under key at the given time.
func Sign(h http.Header, key []byte, id string, at time.Time, body []byte) {
	SignAll(h, [][]byte{key}, id, at, body)
}

// SignAll is Sign under each of keys: webhook-signature carries one v1
// signature per key, in the order of keys, separated by spaces. While a
// secret is rotated, the new key and the previous one both sign, so an app
// holding either verifies. With no keys, h is left unsigned.
func SignAll(h http.Header, keys [][]byte, id string, at time.Time, body []byte) {
	if len(keys) == 0 {
		return
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	sigs := make([]string, len(keys))
	for i, key := range keys {
		sigs[i] = "v1," + signature(key, id, ts, body)
	}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, ts)
	h.Set(HeaderSignature, strings.Join(sigs, " "))
}

// Verify reports whether h carries a v1 signature of body under key, made
// within tolerance of now either way. Any one of the signatures of a
// rotation (SignAll) will do.
func Verify(h http.Header, key []byte, body []byte, now time.Time, tolerance time.Duration) bool {
	id, ts := h.Get(HeaderID), h.Get(HeaderTimestamp)
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || id == "" {
		return false
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return false
	}
	want := signature(key, id, ts, body)
	for sig := range strings.FieldsSeq(h.Get(HeaderSignature)) {
		if v, ok := strings.CutPrefix(sig, "v1,"); ok && hmac.Equal([]byte(v), []byte(want)) {
			return true
		}
	}
	return false
}

// signature is the Standard Webhooks signature: base64 of HMAC-SHA256 over
// "id.timestamp.body" under the decoded secret.
func signature(key []byte, id, ts string, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
