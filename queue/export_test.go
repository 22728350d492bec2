package queue

import (
	"context"
	"time"
)

// Exported for the tests of package queue_test only.
var (
	ShortTx       = (*Store).shortTx
	TakeLeasesSQL = takeLeasesSQL
	ReclaimedSQL  = reclaimedSQL
	PendingSQL    = pending
	HistorySQL    = historySQL
)

// LeaseGrace is how long no lease is granted after the database lost them.
const LeaseGrace = leaseGrace

// TakeDeliveries is Exchange with only leases to take, for the tests of
// taking leases alone.
func (s *Store) TakeDeliveries(ctx context.Context, source string, batch []Delivery, processFor time.Duration) (Deliveries, error) {
	x, err := s.Exchange(ctx, Exchange{Source: source, Take: batch, ProcessFor: processFor})
	return x.Taken, err
}

// StartAttempts is SettleAndStart with nothing to settle, and
// SettleAttempts SettleAndStart with nothing to start: each half of it,
// for the tests of one step at a time.
func (s *Store) StartAttempts(ctx context.Context, claimed []Claimed) ([]bool, error) {
	_, started, err := s.SettleAndStart(ctx, nil, claimed)
	return started, err
}

func (s *Store) SettleAttempts(ctx context.Context, settled []Settled) ([]SettledState, error) {
	states, _, err := s.SettleAndStart(ctx, settled, nil)
	return states, err
}

// Pending is the number of events waiting for a retry.
func (st Stats) Pending() int64 { return st.Failed + st.Retrying }
