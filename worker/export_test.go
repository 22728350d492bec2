package worker

import (
	"crypto/tls"
	"crypto/x509"
	"time"
)

// ErrFenced is the cause a fenced processor's context reports, which the
// heartbeat's tests check; no caller branches on it.
var ErrFenced = errFenced

// TrustTLS makes f trust the app's certificates in roots, as an app's
// https URL would be trusted through the system's roots.
func TrustTLS(f *Forwarder, roots *x509.CertPool) {
	f.transport.TLSClientConfig = &tls.Config{RootCAs: roots}
}

// UseClock makes h read time from now (the wall clock, for its log) and
// elapsed (monotonic, for its fence). Call it before Register.
func UseClock(h *Heartbeat, now func() time.Time, elapsed func() time.Duration) {
	h.clock = funcClock{now, elapsed}
}

type funcClock struct {
	now     func() time.Time
	elapsed func() time.Duration
}

func (c funcClock) Now() time.Time         { return c.now() }
func (c funcClock) Elapsed() time.Duration { return c.elapsed() }

// RetryWindow is how many deliveries r's next turn claims.
func RetryWindow(r *Retrier) int { return r.window.claim() }
