package telemetry

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/internal/store/rejections"
	"github.com/hookd/hookd/queue"
)

// Metrics are the pipeline's Prometheus metrics, and what feeds the
// overview's charts: each fact is counted here once, for both. A nil
// *Metrics records nothing, so tests and embedders need none.
type Metrics struct {
	activity *Activity
	received *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// destDuration is duration by destination too.
	destDuration *prometheus.HistogramVec
	// rateWaits counts the calls that waited under a destination's rate.
	rateWaits *prometheus.CounterVec
	retries   *prometheus.CounterVec
	dead      prometheus.Counter
	pruned    prometheus.Counter
	batch     prometheus.Histogram
	waiting   prometheus.Gauge
	reading   prometheus.Gauge
	bodyMem   prometheus.Gauge
}

// NewMetrics creates the pipeline's metrics and registers them with reg.
// When activity is not nil, it counts the same facts for the charts.
func NewMetrics(reg prometheus.Registerer, activity *Activity) *Metrics {
	m := &Metrics{
		activity: activity,
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: string(metricWebhooksReceived),
			Help: "Deliveries to the receiver by outcome: " +
				labels(OutcomeProcessed, OutcomeDuplicate, OutcomeAlreadyQueued, OutcomeQueued, OutcomeDeferred) + " (200); " +
				labels(OutcomeBadSignature, OutcomeBadPayload, OutcomeTooLarge) + " (4xx); " +
				labels(OutcomeBodyMemory, OutcomeLocked, OutcomeNoSecret, OutcomeUnavailable) + " (503).",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    string(metricProcessingSeconds),
			Help:    "Time one processor run took, by path (" + labels(queue.AttemptPaths...) + ") and result (" + results + ").",
			Buckets: processingBuckets,
		}, []string{"path", "result"}),
		destDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: string(metricDestinationProcessingSeconds),
			Help: "Time one call to a destination took, by destination, path (" + labels(queue.AttemptPaths...) +
				") and result (" + results + ").",
			Buckets: processingBuckets,
		}, []string{"destination", "path", "result"}),
		rateWaits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: string(metricRateWaits),
			Help: "Calls to a destination that waited for their turn under its rate, shared by every replica, or were " +
				"deferred to its retry loop by it, by destination.",
		}, []string{"destination"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: string(metricRetries),
			Help: "Retries committed by the retry loop, by result (" + results + ").",
		}, []string{"result"}),
		dead:   metricDeadLetters.counter("Events that used up their retries and became dead."),
		pruned: metricMarkersPruned.counter("Dedup markers deleted by the pruner."),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    string(metricReceiverBatch),
			Help:    "Deliveries per receiver batch: the deliveries whose leases were taken together in one short transaction.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
		}),
		waiting: metricReceiverWaiting.gauge("Verified deliveries waiting for the receiver's next short transaction: to take their leases, or to write their outcomes."),
		reading: metricReceiverBodiesReading.gauge("Deliveries whose body the receiver is reading now; many that stay are slow or silent senders."),
		bodyMem: metricReceiverBodyMemory.gauge("Bytes held by the bodies being read, at most HOOKD_MAX_BODY_MEMORY; past it deliveries get 503 (body_memory)."),
	}
	reg.MustRegister(m.received, m.duration, m.destDuration, m.rateWaits, m.retries, m.dead, m.pruned, m.batch, m.waiting, m.reading, m.bodyMem)
	return m
}

// counter makes the counter named n.
func (n metricName) counter(help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: string(n), Help: help})
}

// gauge makes the gauge named n.
func (n metricName) gauge(help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: string(n), Help: help})
}

// none is what a nil *Metrics records into: the same metrics, registered
// nowhere, so that no method needs a nil check of its own.
var none = NewMetrics(prometheus.NewRegistry(), nil)

// or returns m, or none when m is nil.
func (m *Metrics) or() *Metrics {
	if m == nil {
		return none
	}
	return m
}

// Received counts one delivery to the receiver with its outcome.
func (m *Metrics) Received(outcome Outcome) {
	m = m.or()
	m.received.WithLabelValues(string(outcome)).Inc()
	m.activity.received(outcome)
}

// ReadingBodies counts deliveries starting (1) or ending (-1) to read
// their body.
func (m *Metrics) ReadingBodies(delta int) { m.or().reading.Add(float64(delta)) }

// HoldBodyMemory counts bytes taken (positive) or given back (negative)
// by the bodies being read.
func (m *Metrics) HoldBodyMemory(delta int64) { m.or().bodyMem.Add(float64(delta)) }

// Refused notes why a delivery was refused, beyond Received's label: one
// well formed, recent and signed with no configured secret counts toward
// the "is STRIPE_WEBHOOK_SECRET right?" alert; other refusals do not.
func (m *Metrics) Refused(reason rejections.Reason) {
	if checkSignature(reason) == signatureWrongSecret {
		m.or().activity.wrongSignature()
	}
}

// ObserveProcess records how long one processor run took, on path, and
// whether it succeeded.
func (m *Metrics) ObserveProcess(path queue.AttemptPath, ok bool, took time.Duration) {
	m.or().duration.WithLabelValues(string(path), string(resultOf(ok))).Observe(took.Seconds())
}

// ObserveDelivery is ObserveProcess of one call to destination: counted in
// both the totals by path and the series by destination.
func (m *Metrics) ObserveDelivery(destination string, path queue.AttemptPath, ok bool, took time.Duration) {
	m = m.or()
	m.ObserveProcess(path, ok, took)
	if destination == "" {
		destination = queue.DefaultDestination
	}
	m.destDuration.WithLabelValues(destination, string(path), string(resultOf(ok))).Observe(took.Seconds())
}

// CountRateWait counts a call to destination that waited for its turn
// under the destination's rate, or was deferred by it.
func (m *Metrics) CountRateWait(destination string) {
	if destination == "" {
		destination = queue.DefaultDestination
	}
	m.or().rateWaits.WithLabelValues(destination).Inc()
}

// processingBuckets span a fast in-process handler to the 10 s forward
// timeout.
var processingBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// ObserveBatch records how many deliveries took their leases in one short
// transaction.
func (m *Metrics) ObserveBatch(deliveries int) { m.or().batch.Observe(float64(deliveries)) }

// AddWaiting adds n (negative: takes) to the deliveries waiting for the
// receiver's next short transaction.
func (m *Metrics) AddWaiting(n int) { m.or().waiting.Add(float64(n)) }

// CountRetries counts the retries of one batch once they are committed.
func (m *Metrics) CountRetries(succeeded, failed int) {
	m = m.or()
	m.retries.WithLabelValues(string(queue.AttemptSucceeded)).Add(float64(succeeded))
	m.retries.WithLabelValues(string(queue.AttemptFailed)).Add(float64(failed))
	m.activity.retried(succeeded, failed)
}

// CountDead counts an event that used up its retries, once that is
// committed.
func (m *Metrics) CountDead() {
	m = m.or()
	m.dead.Inc()
	m.activity.add(actDead, 1)
}

// CountPruned counts the dedup markers a prune deleted.
func (m *Metrics) CountPruned(n int64) { m.or().pruned.Add(float64(n)) }

// results lists the result labels, for the metrics' help.
const results = string(queue.AttemptSucceeded) + ", " + string(queue.AttemptFailed)

// labels lists labels, for the metrics' help.
func labels[L ~string](ls ...L) string {
	names := make([]string, len(ls))
	for i, l := range ls {
		names[i] = string(l)
	}
	return strings.Join(names, ", ")
}
