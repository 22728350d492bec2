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

// TakeDeliveries is SettleAndTake with nothing to settle, for the tests of
// taking leases alone.
func (s *Store) TakeDeliveries(ctx context.Context, source string, batch []Delivery, processFor time.Duration) (Deliveries, error) {
	_, d, err := s.SettleAndTake(ctx, source, nil, batch, processFor)
	return d, err
}

// Pending is the number of events waiting for a retry.
func (st Stats) Pending() int64 { return st.Failed + st.Retrying }
