package worker

import (
	"crypto/tls"
	"crypto/x509"
)

// ErrFenced is the cause a fenced processor's context reports, which the
// heartbeat's tests check; no caller branches on it.
var ErrFenced = errFenced

// TrustTLS makes f trust the app's certificates in roots, as an app's
// https URL would be trusted through the system's roots.
func TrustTLS(f *Forwarder, roots *x509.CertPool) {
	f.transport.TLSClientConfig = &tls.Config{RootCAs: roots}
}
