package worker_test

import (
	"context"
	"sync"
	"testing"

	"github.com/hookd/hookd/queue"
	"github.com/hookd/hookd/queue/queuetest"
	"github.com/hookd/hookd/worker"
)

// A flood of refusals between two writes becomes PerFlush rows and one row
// per reason adding up the rest, with not one refusal lost from the counts.
func TestRejectionLog_AFloodBecomesAFewRowsWithExactCounts(t *testing.T) {
	t.Parallel()
	store, pool := queuetest.NewStore(t)
	log := worker.NewRejectionLog(store, discardLogger, worker.RejectionLogConfig{PerFlush: 5})

	const perReason = 400
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, err := range []error{worker.ErrWrongSignature, worker.ErrTooLarge, worker.ErrNotJSON} {
		for range 8 {
			wg.Go(func() {
				<-start
				for range perReason / 8 {
					log.Record(worker.Refusal{Err: err, HTTPStatus: 400, RemoteAddr: "192.0.2.7",
						Payload: []byte(`{"id":"evt_flood","type":"invoice.paid"}`)})
				}
			})
		}
	}
	close(start)
	wg.Wait()
	if err := log.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}

	var rows, total, aggregated int64
	err := pool.QueryRow(context.Background(), `
		SELECT count(*), sum(count), count(*) FILTER (WHERE count > 1) FROM webhook_rejections`).
		Scan(&rows, &total, &aggregated)
	if err != nil {
		t.Fatal(err)
	}
	if rows != 5+3 || aggregated != 3 || total != 3*perReason {
		t.Errorf("got %d rows (%d adding up others) counting %d refusals; want 5 one by one, 3 adding up, counting %d",
			rows, aggregated, total, 3*perReason)
	}

	// The next write starts a new budget.
	log.Record(worker.Refusal{Err: worker.ErrNoSignature, HTTPStatus: 400})
	if err := log.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	page, err := store.Rejections(context.Background(), queue.RejectionFilter{Reason: queue.RejectNoSignature})
	if err != nil || page.Total != 1 || page.Rejections[0].Count != 1 {
		t.Errorf("after the flood, a refusal is recorded one by one again: got %+v, %v", page, err)
	}
}

func TestRejectionLog_NilRecordsNothing(t *testing.T) {
	t.Parallel()
	var log *worker.RejectionLog
	log.Record(worker.Refusal{Err: worker.ErrTooLarge})
}
