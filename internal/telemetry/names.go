// Package telemetry counts what the pipeline does, for the people who watch
// it: the Prometheus metrics, the activity counts behind the overview's
// charts, and the rejection log of refused deliveries. Counting never waits
// on the database: one flush loop writes counts and log in batches, so a
// crash loses at most a flush interval of them, never an event.
package telemetry

// Every hookd_* metric name and label value is a constant here. A nil
// *Metrics, *Activity or *RejectionLog records nothing.

import (
	"time"

	"github.com/hookd/hookd/queue"
)

// DefaultStopTimeout bounds the last writes a background writer makes once
// it is told to stop: the last flush of the activity counts or of the
// rejection log, an alert being posted. Long enough for a write to a
// healthy database or webhook, short enough not to hold a deploy.
const DefaultStopTimeout = 5 * time.Second

// metricName is the name of one of hookd's Prometheus metrics.
type metricName string

// hookd's metrics, each registered once.
const (
	metricWebhooksReceived      metricName = "hookd_webhooks_received_total"
	metricProcessingSeconds     metricName = "hookd_processing_duration_seconds"
	metricRetries               metricName = "hookd_retries_total"
	metricDeadLetters           metricName = "hookd_dead_letters_total"
	metricMarkersPruned         metricName = "hookd_markers_pruned_total"
	metricReceiverBatch         metricName = "hookd_receiver_batch_deliveries"
	metricReceiverWaiting       metricName = "hookd_receiver_waiting_deliveries"
	metricReceiverBodiesReading metricName = "hookd_receiver_bodies_reading"
	metricReceiverBodyMemory    metricName = "hookd_receiver_body_memory_bytes"
	metricQueueEvents           metricName = "hookd_queue_events"
	metricQueueDueEvents        metricName = "hookd_queue_due_events"
	metricQueueStatsUp          metricName = "hookd_queue_stats_up"
	metricCommitWaitsForStandby metricName = "hookd_database_commit_waits_for_standby"
	metricDatabaseStandbys      metricName = "hookd_database_standbys"
	metricQueueSuspects         metricName = "hookd_queue_suspects"

	// One series per destination (a configured name, so few).
	metricDestinationQueueEvents       metricName = "hookd_destination_queue_events"
	metricDestinationOldestPending     metricName = "hookd_destination_oldest_pending_seconds"
	metricDestinationProcessingSeconds metricName = "hookd_destination_processing_duration_seconds"
	metricOrderHeldKeys                metricName = "hookd_order_held_keys"
	metricRateWaits                    metricName = "hookd_rate_waits_total"
)

// Outcome is how the receiver answered a delivery: the outcome label of
// metricWebhooksReceived, and what the activity counts sort deliveries by.
type Outcome string

// The receiver's outcomes, by the status they are answered with.
const (
	// 200: the outcome is durable.
	OutcomeProcessed     Outcome = "processed"
	OutcomeDuplicate     Outcome = "duplicate"
	OutcomeAlreadyQueued Outcome = "already_queued"
	OutcomeQueued        Outcome = "queued"
	OutcomeDeferred      Outcome = "deferred"
	// A destination's ping, recorded; a test-mode event discarded or held
	// on the queue, as its endpoint's test_events says.
	OutcomePinged        Outcome = "pinged"
	OutcomeTestDiscarded Outcome = "test_discarded"
	OutcomeHeld          Outcome = "held"
	// 4xx: refused, and noted in the rejection log.
	OutcomeBadSignature Outcome = "bad_signature"
	OutcomeBadPayload   Outcome = "bad_payload"
	OutcomeTooLarge     Outcome = "too_large"
	// 503: Stripe delivers again.
	OutcomeLocked      Outcome = "locked"
	OutcomeNoSecret    Outcome = "no_secret"
	OutcomeUnavailable Outcome = "unavailable"
	// OutcomeBodyMemory: the body found no room under
	// HOOKD_MAX_BODY_MEMORY; never read, never processed.
	OutcomeBodyMemory Outcome = "body_memory"
)

func resultOf(ok bool) queue.AttemptOutcome {
	if ok {
		return queue.AttemptSucceeded
	}
	return queue.AttemptFailed
}
