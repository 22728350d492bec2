package receiver

// The refusal errors are the receiver's own: callers branch on their
// parents, ErrBadSignature and ErrBadPayload, and the rejection log on
// RejectReason. The package's tests name each to check which one a
// delivery got.
var (
	ErrNoSignature        = errNoSignature
	ErrMalformedSignature = errMalformedSignature
	ErrStaleSignature     = errStaleSignature
	ErrWrongSignature     = errWrongSignature
	ErrNotJSON            = errNotJSON
	ErrBadEventID         = errBadEventID
	ErrBadEventType       = errBadEventType
)
