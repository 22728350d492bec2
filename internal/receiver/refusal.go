package receiver

import (
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookd/hookd/internal/endpoint"
	"github.com/hookd/hookd/internal/store/rejections"
	"github.com/hookd/hookd/internal/stripeevent"
)

var (
	// ErrBadSignature means the Stripe-Signature header is missing,
	// malformed, stale, or matches no configured secret. It is wrapped with
	// the reason.
	ErrBadSignature = errors.New("bad signature")
	// ErrBadPayload means the body is not a Stripe event: not JSON, or
	// without a string id and type. It is wrapped with the reason.
	ErrBadPayload = errors.New("bad payload")
	// ErrNoSecret means no signing secret is configured, so no delivery can
	// be verified; Stripe keeps redelivering until one is.
	ErrNoSecret = errors.New("no Stripe signing secret configured")
)

// Why a delivery was refused, for the rejection log. Each is an
// ErrBadSignature or an ErrBadPayload, with the same message, and is
// wrapped with the reason the sender is told.
var (
	errNoSignature        = fmt.Errorf("%w", ErrBadSignature)
	errMalformedSignature = fmt.Errorf("%w", ErrBadSignature)
	errStaleSignature     = fmt.Errorf("%w", ErrBadSignature)
	errWrongSignature     = fmt.Errorf("%w", ErrBadSignature)
	errNotJSON            = fmt.Errorf("%w", ErrBadPayload)
	errBadEventID         = fmt.Errorf("%w", ErrBadPayload)
	errBadEventType       = fmt.Errorf("%w", ErrBadPayload)
	// errBadField: an account, context or snapshot_event that is not an
	// id (they become headers and lease keys).
	errBadField = fmt.Errorf("%w", ErrBadPayload)
)

// Refusals decided before the pipeline runs, by the HTTP handler.
var (
	// ErrTooLarge is a body over the receiver's size limit.
	ErrTooLarge = errors.New("body larger than the limit")
	// ErrUnreadableBody is a body that could not be read to its end.
	ErrUnreadableBody = errors.New("cannot read body")
	// ErrMethodNotAllowed is a request to the receiver that is not a POST.
	ErrMethodNotAllowed = errors.New("method not allowed: Stripe POSTs its events")
)

// RejectReason maps why a delivery was refused (an error of this package)
// to the rejection log's reason: the one place that does.
func RejectReason(err error) rejections.Reason {
	switch {
	case errors.Is(err, ErrTooLarge):
		return rejections.TooLarge
	case errors.Is(err, ErrMethodNotAllowed):
		return rejections.MethodNotAllowed
	case errors.Is(err, ErrUnreadableBody):
		return rejections.UnreadableBody
	case errors.Is(err, errNoSignature):
		return rejections.NoSignature
	case errors.Is(err, errStaleSignature):
		return rejections.StaleSignature
	case errors.Is(err, errWrongSignature):
		return rejections.WrongSignature
	case errors.Is(err, ErrBadSignature):
		return rejections.MalformedSignature
	case errors.Is(err, errBadEventID):
		return rejections.BadID
	case errors.Is(err, errBadEventType):
		return rejections.BadType
	case errors.Is(err, ErrBadPayload):
		return rejections.BadJSON
	}
	// A 4xx no case above knows: the body, or what was read of it, is what
	// the receiver could not use.
	return rejections.UnreadableBody
}

// SignatureTolerance is how old a signature's timestamp may be: Stripe's
// own libraries' default, which bounds how long a captured delivery can be
// replayed.
const SignatureTolerance = 300 * time.Second

// toleranceText is SignatureTolerance as a refusal tells it: "300 s".
var toleranceText = fmt.Sprintf("%d s", int(SignatureTolerance.Seconds()))

// verify checks sigHeader against every endpoint's secrets with stripe-go
// and returns the endpoint whose secret matches: it is the endpoint the
// delivery came through. The header's shape and age do not depend on the
// secret, so those reasons are final at the first secret; only "no
// signature matches" moves on to the next one.
func (r *Receiver) verify(payload []byte, sigHeader string) (*endpoint.Endpoint, error) {
	if len(r.endpoints) == 0 {
		return nil, ErrNoSecret
	}
	for i := range r.endpoints {
		for _, secret := range r.endpoints[i].Secrets {
			err := webhook.ValidatePayloadWithTolerance(payload, sigHeader, secret, SignatureTolerance)
			switch {
			case err == nil:
				return &r.endpoints[i], nil
			case errors.Is(err, webhook.ErrNotSigned):
				return nil, fmt.Errorf("%w: no Stripe-Signature header", errNoSignature)
			case errors.Is(err, webhook.ErrInvalidHeader):
				return nil, fmt.Errorf("%w: malformed Stripe-Signature header", errMalformedSignature)
			case errors.Is(err, webhook.ErrTooOld):
				return nil, fmt.Errorf("%w: timestamp older than the %s tolerance, or missing", errStaleSignature, toleranceText)
			case errors.Is(err, webhook.ErrNoValidSignature) && !hasV1Signature(sigHeader):
				// stripe-go says this too of a header that holds no v1
				// signature at all, before it looks at the timestamp:
				// that is a malformed header, not a signature made with
				// a secret hookd lacks, which the signature alert counts.
				return nil, fmt.Errorf("%w: malformed Stripe-Signature header: it holds no v1 signature", errMalformedSignature)
			case errors.Is(err, webhook.ErrNoValidSignature):
				continue
			default:
				return nil, fmt.Errorf("%w: %v", errMalformedSignature, err)
			}
		}
	}
	return nil, fmt.Errorf("%w: no v1 signature matches a configured secret", errWrongSignature)
}

// hasV1Signature reports whether sigHeader holds a v1 signature stripe-go
// can compare: a v1= pair whose value is hex. Other schemes (v0, test
// mode's) are not Stripe's signatures to verify.
func hasV1Signature(sigHeader string) bool {
	for key, v := range stripeevent.SignatureElements(sigHeader) {
		if key == "v1" && v != "" {
			if _, err := hex.DecodeString(v); err == nil {
				return true
			}
		}
	}
	return false
}
