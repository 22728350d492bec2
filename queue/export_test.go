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

// TakeDeliveries is Exchange with only leases to take, for the tests of
// taking leases alone.
func (s *Store) TakeDeliveries(ctx context.Context, source string, batch []Delivery, processFor time.Duration) (Deliveries, error) {
	x, err := s.Exchange(ctx, Exchange{Source: source, Take: batch, ProcessFor: processFor})
	return x.Taken, err
}

// Pending is the number of events waiting for a retry.
func (st Stats) Pending() int64 { return st.Failed + st.Retrying }
