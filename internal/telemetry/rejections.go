package telemetry

import (
	"cmp"
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookd/hookd/internal/eventjson"
	"github.com/hookd/hookd/internal/netblock"
	"github.com/hookd/hookd/internal/startstop"
	"github.com/hookd/hookd/internal/store/rejections"
	"github.com/hookd/hookd/internal/stripeevent"
)

// Refusal is one delivery the receiver refused with a 4xx, as the HTTP
// handler saw it.
type Refusal struct {
	// Reason is why, as the receiver reads its refusal
	// (receiver.RejectReason), and Detail what the sender was told.
	Reason     rejections.Reason
	Detail     string
	HTTPStatus int
	RemoteAddr string
	// Payload is the body as read (up to the size limit) and SigHeader the
	// Stripe-Signature header. Neither is stored: only the event id the
	// body claims and the signature's timestamp are taken from them.
	Payload   []byte
	SigHeader string
}

// RejectionLogConfig configures a RejectionLog. Zero fields get the
// defaults below.
type RejectionLogConfig struct {
	// Secrets are the receiver's signing secrets. With them, a signature
	// refused as stale is told apart: made with a configured secret (the
	// sender's clock is off, or the delivery is a replay) or not.
	Secrets []string
	// PerFlush is how many refusals between two writes are recorded one
	// row each. The rest are added up into one row per reason, with a
	// count, so a flood of bad requests costs at most PerFlush rows plus
	// one per reason every FlushInterval, not a row per request.
	// Default: 10.
	PerFlush int
	// SignedPerFlush is PerFlush for the refusals whose signature was well
	// formed and recent (checkSignature): Stripe signing with a secret
	// hookd lacks, or a body refused after its signature verified. They
	// have a budget and rows of their own, so a flood of unsigned or
	// garbage posts, which anyone can send, cannot add them up out of
	// sight. Default: 10.
	SignedPerFlush int
	// PerAddress is how many refusals of each budget one client (an
	// address, an IPv6 /64: netblock.Of) may have recorded one by one
	// between two writes; its others are added up like those past the
	// budget. A single sender cannot then spend a budget alone: sending
	// well-formed, recent signatures with random hex, one address takes
	// PerAddress of SignedPerFlush's rows, and the rest stay for other
	// senders, Stripe among them. Default: 3.
	PerAddress int
	// FlushInterval is how often the recorded refusals are written, in one
	// statement. Default: 1 s.
	FlushInterval time.Duration
	// StopTimeout bounds each write, the last one too, which Run makes
	// once its context is cancelled. Default: 5 s.
	StopTimeout time.Duration
}

// RejectionLog records the deliveries the receiver refused, for the
// dashboard's rejection log. Record never waits on the database: refusals
// are kept in memory and written every FlushInterval, so a crash loses at
// most that much of the log, and a flood of bad requests becomes at most
// PerFlush plus SignedPerFlush rows and one row per reason per write: with
// the defaults, 10 refusals a second with a well-formed, recent signature
// and 10 others recorded one by one, and the rest counted. A nil
// *RejectionLog records nothing.
type RejectionLog struct {
	store  *rejections.Store
	logger *slog.Logger
	cfg    RejectionLogConfig

	mu sync.Mutex
	// admitted counts the refusals of each budget recorded one by one since
	// the last write: [false] unproven signatures, [true] signed ones;
	// admittedFrom the same, by client.
	admitted     map[bool]int
	admittedFrom map[clientKey]int
	pending      []rejections.Rejection
	extra        map[summaryKey]*rejections.Rejection

	flushes *startstop.Service
}

// clientKey is one client's share of one budget.
type clientKey struct {
	signed bool
	block  string
}

// summaryKey is the row that adds up the refusals beyond a budget: one per
// budget and reason, so a signed refusal is never counted in a row a flood
// of garbage can make.
type summaryKey struct {
	signed bool
	reason rejections.Reason
}

// NewRejectionLog returns a RejectionLog writing to store.
func NewRejectionLog(store *rejections.Store, logger *slog.Logger, cfg RejectionLogConfig) *RejectionLog {
	cfg.PerFlush = cmp.Or(cfg.PerFlush, 10)
	cfg.SignedPerFlush = cmp.Or(cfg.SignedPerFlush, 10)
	cfg.PerAddress = cmp.Or(cfg.PerAddress, 3)
	cfg.FlushInterval = cmp.Or(cfg.FlushInterval, time.Second)
	cfg.StopTimeout = cmp.Or(cfg.StopTimeout, DefaultStopTimeout)
	l := &RejectionLog{
		store:        store,
		logger:       logger.With("component", "rejections"),
		cfg:          cfg,
		admitted:     map[bool]int{},
		admittedFrom: map[clientKey]int{},
		extra:        map[summaryKey]*rejections.Rejection{},
	}
	l.flushes = flushLoop(cfg.FlushInterval, cfg.StopTimeout, l.Flush, l.flushFailed)
	return l
}

// Record notes a refused delivery for the next write.
func (l *RejectionLog) Record(r Refusal) {
	if l == nil {
		return
	}
	now := time.Now()
	reason := r.Reason
	signed := checkSignature(reason) != signatureUnproven
	budget := l.cfg.PerFlush
	if signed {
		budget = l.cfg.SignedPerFlush
	}
	key := summaryKey{signed: signed, reason: reason}
	client := clientKey{signed: signed, block: netblock.Of(r.RemoteAddr)}
	l.mu.Lock()
	one := l.admitted[signed] < budget && l.admittedFrom[client] < l.cfg.PerAddress
	if one {
		l.admitted[signed]++
		l.admittedFrom[client]++
	} else if sum, ok := l.extra[key]; ok {
		sum.Count++
	} else {
		l.extra[key] = &rejections.Rejection{At: now, Reason: reason, HTTPStatus: r.HTTPStatus,
			Detail: r.Detail, RemoteAddr: r.RemoteAddr, Count: 1}
	}
	l.mu.Unlock()
	if !one {
		return
	}
	// Read the body and the header outside the lock: concurrent refusals
	// only wait for each other's bookkeeping.
	row := l.describe(now, reason, r)
	l.mu.Lock()
	l.pending = append(l.pending, row)
	l.mu.Unlock()
}

// describe makes the row of one refusal.
func (l *RejectionLog) describe(now time.Time, reason rejections.Reason, r Refusal) rejections.Rejection {
	row := rejections.Rejection{At: now, Reason: reason, HTTPStatus: r.HTTPStatus, Detail: r.Detail,
		RemoteAddr: r.RemoteAddr, ClaimedEventID: eventjson.ClaimedID(r.Payload), Count: 1}
	if t, ok := signatureTime(r.SigHeader); ok {
		row.SignedAt = &t
	}
	if reason == rejections.StaleSignature {
		matches := false
		for _, secret := range l.cfg.Secrets {
			if webhook.ValidatePayloadIgnoringTolerance(r.Payload, r.SigHeader, secret) == nil {
				matches = true
				break
			}
		}
		row.SignatureMatches = &matches
	}
	return row
}

// Flush writes the refusals recorded since the last flush. Those it could
// not write are dropped: the log is for people reading it, and keeping them
// would let an unreachable database grow the process's memory.
func (l *RejectionLog) Flush(ctx context.Context) error {
	l.mu.Lock()
	rows := l.pending
	l.pending = nil
	clear(l.admitted)
	clear(l.admittedFrom)
	for key, sum := range l.extra {
		rows = append(rows, *sum)
		delete(l.extra, key)
	}
	l.mu.Unlock()
	return l.store.Record(ctx, rows)
}

// Run writes every FlushInterval until ctx is cancelled, then once more,
// bounded by StopTimeout, and returns nil. A failed write is logged.
func (l *RejectionLog) Run(ctx context.Context) error { return l.flushes.Run(ctx) }

func (l *RejectionLog) flushFailed(ctx context.Context, err error, last bool) {
	if last {
		l.logger.Warn("last refused deliveries not logged at stop", "err", err)
		return
	}
	l.logger.WarnContext(ctx, "refused deliveries since the last write not logged", "err", err)
}

// signatureCheck is what a refusal shows of its Stripe-Signature header.
type signatureCheck int

const (
	// signatureUnproven: no header, a malformed or stale one, or a refusal
	// made before the signature was checked. Anyone on the internet can
	// send one, so it says nothing about Stripe or hookd's secret.
	signatureUnproven signatureCheck = iota
	// signatureWrongSecret: well formed and recent, matching no configured
	// secret: Stripe signing with a secret hookd lacks, or another sender
	// taking the trouble to look like it.
	signatureWrongSecret
	// signatureVerified: well formed, recent and made with a configured
	// secret; the body was what got refused.
	signatureVerified
)

// checkSignature reads a refusal's reason for what its signature showed:
// the one place that tells a signature well formed and recent from one
// anyone could send, for the signature alert's count (Metrics.Refused) and
// the rejection log's budgets.
func checkSignature(reason rejections.Reason) signatureCheck {
	switch {
	case reason == rejections.WrongSignature:
		return signatureWrongSecret
	case reason.SignatureVerified():
		return signatureVerified
	}
	return signatureUnproven
}

// signatureTime returns the t= timestamp of a Stripe-Signature header.
func signatureTime(header string) (time.Time, bool) {
	for key, v := range stripeevent.SignatureElements(header) {
		if key != "t" {
			continue
		}
		unix, err := strconv.ParseInt(v, 10, 64)
		// Beyond year 9999 PostgreSQL cannot store it, and it is no clock.
		if err != nil || unix < 0 || unix > 253402300799 {
			return time.Time{}, false
		}
		return time.Unix(unix, 0), true
	}
	return time.Time{}, false
}
