package telemetry_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/hookd/hookd/internal/store/rejections"
	"github.com/hookd/hookd/internal/telemetry"
)

// A flood of refusals between two writes becomes PerFlush rows for the
// unsigned, SignedPerFlush for those with a well-formed, recent signature,
// and one row per reason adding up the rest, with not one refusal lost from
// the counts.
func TestRejectionLog_AFloodBecomesAFewRowsWithExactCounts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	log := telemetry.NewRejectionLog(b.rejections, discardLogger, telemetry.RejectionLogConfig{PerFlush: 5, SignedPerFlush: 4})

	// From many addresses, so that each budget, not one sender's share of
	// it (PerAddress), is what runs out.
	const perReason = 400
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, reason := range []rejections.Reason{rejections.WrongSignature, rejections.TooLarge, rejections.BadJSON} {
		for sender := range 8 {
			wg.Go(func() {
				<-start
				for range perReason / 8 {
					log.Record(telemetry.Refusal{Reason: reason, Detail: string(reason), HTTPStatus: 400,
						RemoteAddr: fmt.Sprintf("192.0.2.%d", sender), Payload: []byte(`{"id":"evt_flood","type":"invoice.paid"}`)})
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
	err := b.pool.QueryRow(context.Background(), `
		SELECT count(*), sum(count), count(*) FILTER (WHERE count > 1) FROM webhook_rejections`).
		Scan(&rows, &total, &aggregated)
	if err != nil {
		t.Fatal(err)
	}
	// Too large is unsigned; a wrong signature and a signed body that is
	// not JSON share the signed budget.
	if rows != 5+4+3 || aggregated != 3 || total != 3*perReason {
		t.Errorf("got %d rows (%d adding up others) counting %d refusals; want 5+4 one by one, 3 adding up, counting %d",
			rows, aggregated, total, 3*perReason)
	}

	// The next write starts a new budget.
	log.Record(telemetry.Refusal{Reason: rejections.NoSignature, HTTPStatus: 400})
	if err := log.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	page, err := b.rejections.List(context.Background(), rejections.Filter{Reason: rejections.NoSignature})
	if err != nil || page.Total != 1 || page.Rejections[0].Count != 1 {
		t.Errorf("after the flood, a refusal is recorded one by one again: got %+v, %v", page, err)
	}
}

// Refusals anyone can send, past their budget, leave the signed budget
// whole: each refusal with a well-formed, recent signature gets a row of its
// own, while the garbage around it is added up in rows of its own.
func TestRejectionLog_GarbageCannotSpendTheSignedBudget(t *testing.T) {
	t.Parallel()
	b := setup(t)
	log := telemetry.NewRejectionLog(b.rejections, discardLogger, telemetry.RejectionLogConfig{})

	const garbage, signed = 1000, 10
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, reason := range []rejections.Reason{rejections.NoSignature, rejections.MalformedSignature, rejections.StaleSignature,
		rejections.TooLarge} {
		wg.Go(func() {
			<-start
			for range garbage / 4 {
				log.Record(telemetry.Refusal{Reason: reason, HTTPStatus: 400, RemoteAddr: fmt.Sprintf("198.51.100.%d", i),
					Payload: []byte(`{"id":"evt_real"}`)})
			}
		})
	}
	wg.Go(func() {
		<-start
		fromStripe(log, signed)
	})
	close(start)
	wg.Wait()
	if err := log.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var signedRows, signedSums, garbageRows, garbageSums, garbageTotal int64
	err := b.pool.QueryRow(context.Background(), `
		SELECT count(*) FILTER (WHERE reason = 'wrong_signature' AND count = 1 AND claimed_event_id = 'evt_stripe'),
		       count(*) FILTER (WHERE reason = 'wrong_signature' AND count > 1),
		       count(*) FILTER (WHERE reason <> 'wrong_signature' AND count = 1),
		       count(*) FILTER (WHERE reason <> 'wrong_signature' AND count > 1),
		       sum(count) FILTER (WHERE reason <> 'wrong_signature')
		FROM webhook_rejections`).Scan(&signedRows, &signedSums, &garbageRows, &garbageSums, &garbageTotal)
	if err != nil {
		t.Fatal(err)
	}
	if signedRows != signed || signedSums != 0 {
		t.Errorf("wrong signatures: %d rows of their own and %d adding up; want %d and none", signedRows, signedSums, signed)
	}
	if garbageRows != 10 || garbageSums != 4 || garbageTotal != garbage {
		t.Errorf("garbage: %d rows of its own, %d adding up, counting %d; want 10, 4 and %d",
			garbageRows, garbageSums, garbageTotal, garbage)
	}
}

// One sender cannot spend a budget alone: a flood of well-formed, recent
// signatures with random hex from one IPv6 /64, which anyone can make, takes
// PerAddress of the signed rows, and Stripe's refusals beside it each keep
// a row of their own; the flood is added up, every refusal counted.
func TestRejectionLog_OneSenderCannotSpendABudgetAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	log := telemetry.NewRejectionLog(b.rejections, discardLogger, telemetry.RejectionLogConfig{})

	const flood, stripe = 1000, 5
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			<-start
			for i := range flood / 4 {
				log.Record(telemetry.Refusal{Reason: rejections.WrongSignature, HTTPStatus: 400,
					RemoteAddr: fmt.Sprintf("2001:db8:7:7:%x::%x", g, i), Payload: []byte(`{"id":"evt_forged"}`)})
			}
		})
	}
	wg.Go(func() {
		<-start
		fromStripe(log, stripe)
	})
	close(start)
	wg.Wait()
	if err := log.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var stripeRows, floodRows, sums, total int64
	err := b.pool.QueryRow(context.Background(), `
		SELECT count(*) FILTER (WHERE count = 1 AND claimed_event_id = 'evt_stripe'),
		       count(*) FILTER (WHERE count = 1 AND claimed_event_id = 'evt_forged'),
		       count(*) FILTER (WHERE count > 1), sum(count)
		FROM webhook_rejections`).Scan(&stripeRows, &floodRows, &sums, &total)
	if err != nil {
		t.Fatal(err)
	}
	if stripeRows != stripe || floodRows != 3 || sums != 1 || total != flood+stripe {
		t.Errorf("got %d rows of Stripe's, %d of the flood's, %d adding up, counting %d; want %d, 3, 1 and %d",
			stripeRows, floodRows, sums, total, stripe, flood+stripe)
	}
}

// fromStripe records n refusals of deliveries Stripe signed with a secret
// hookd lacks, claiming evt_stripe, each from another of Stripe's
// addresses (it delivers from a dozen).
func fromStripe(log *telemetry.RejectionLog, n int) {
	for i := range n {
		log.Record(telemetry.Refusal{Reason: rejections.WrongSignature, HTTPStatus: 400, RemoteAddr: fmt.Sprintf("3.18.12.%d", i),
			Payload: []byte(`{"id":"evt_stripe"}`)})
	}
}

func TestRejectionLog_NilRecordsNothing(t *testing.T) {
	t.Parallel()
	var log *telemetry.RejectionLog
	log.Record(telemetry.Refusal{Reason: rejections.TooLarge})
}
