package worker

// ErrFenced is the cause a fenced processor's context reports, which the
// heartbeat's tests check; no caller branches on it.
var ErrFenced = errFenced
