package worker

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/queue"
)

// Metrics are the pipeline's Prometheus metrics, and what feeds the
// overview's charts: each fact is counted here once, for both. A nil
// *Metrics records nothing, so tests and embedders need none.
type Metrics struct {
	activity *Activity
	received *prometheus.CounterVec
	duration *prometheus.HistogramVec
	retries  *prometheus.CounterVec
	dead     prometheus.Counter
	pruned   prometheus.Counter
	batch    prometheus.Histogram
	waiting  prometheus.Gauge
	reading  prometheus.Gauge
	bodyMem  prometheus.Gauge
}

// NewMetrics creates the pipeline's metrics and registers them with reg.
// When activity is not nil, it counts the same facts for the charts.
func NewMetrics(reg prometheus.Registerer, activity *Activity) *Metrics {
	m := &Metrics{
		activity: activity,
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookd_webhooks_received_total",
			Help: "Deliveries to the receiver by outcome: processed, duplicate, already_queued, queued, deferred (200); bad_signature, bad_payload, too_large (4xx); body_memory, locked, no_secret, unavailable (503).",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hookd_processing_duration_seconds",
			Help: "Time one processor run took, by path (inline, retry, manual, reconcile) and result (succeeded, failed).",
			// From a fast in-process handler to the 10 s forward timeout.
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"path", "result"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookd_retries_total",
			Help: "Retries committed by the retry loop, by result (succeeded, failed).",
		}, []string{"result"}),
		dead: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookd_dead_letters_total",
			Help: "Events that used up their retries and became dead.",
		}),
		pruned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookd_markers_pruned_total",
			Help: "Dedup markers deleted by the pruner.",
		}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hookd_receiver_batch_deliveries",
			Help:    "Deliveries per receiver batch: the deliveries whose leases were taken together in one short transaction.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
		}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hookd_receiver_waiting_deliveries",
			Help: "Verified deliveries waiting for the receiver's next short transaction: to take their leases, or to write their outcomes.",
		}),
		reading: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hookd_receiver_bodies_reading",
			Help: "Deliveries whose body the receiver is reading now; many that stay are slow or silent senders.",
		}),
		bodyMem: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hookd_receiver_body_memory_bytes",
			Help: "Bytes held by the bodies being read, at most HOOKD_MAX_BODY_MEMORY; past it deliveries get 503 (body_memory).",
		}),
	}
	reg.MustRegister(m.received, m.duration, m.retries, m.dead, m.pruned, m.batch, m.waiting, m.reading, m.bodyMem)
	return m
}

// Received counts one delivery to the receiver with its outcome label.
func (m *Metrics) Received(outcome string) {
	if m == nil {
		return
	}
	m.received.WithLabelValues(outcome).Inc()
	m.activity.received(outcome)
}

// ReadingBodies counts deliveries starting (1) or ending (-1) to read
// their body.
func (m *Metrics) ReadingBodies(delta int) {
	if m == nil {
		return
	}
	m.reading.Add(float64(delta))
}

// HoldBodyMemory counts bytes taken (positive) or given back (negative)
// by the bodies being read.
func (m *Metrics) HoldBodyMemory(delta int64) {
	if m == nil {
		return
	}
	m.bodyMem.Add(float64(delta))
}

// Refused notes why a delivery was refused, beyond Received's label: one
// well formed, recent and signed with no configured secret counts toward
// the "is STRIPE_WEBHOOK_SECRET right?" alert; other refusals do not.
func (m *Metrics) Refused(err error) {
	if m == nil || checkSignature(err) != signatureWrongSecret {
		return
	}
	m.activity.wrongSignature()
}

func (m *Metrics) observeProcess(path queue.AttemptPath, ok bool, took time.Duration) {
	if m == nil {
		return
	}
	m.duration.WithLabelValues(string(path), result(ok)).Observe(took.Seconds())
}

func (m *Metrics) observeBatch(deliveries int) {
	if m == nil {
		return
	}
	m.batch.Observe(float64(deliveries))
}

func (m *Metrics) addWaiting(n int) {
	if m == nil {
		return
	}
	m.waiting.Add(float64(n))
}

func (m *Metrics) countRetries(succeeded, failed int) {
	if m == nil {
		return
	}
	m.retries.WithLabelValues("succeeded").Add(float64(succeeded))
	m.retries.WithLabelValues("failed").Add(float64(failed))
	m.activity.retried(succeeded, failed)
}

func (m *Metrics) countDead() {
	if m == nil {
		return
	}
	m.dead.Inc()
	m.activity.add(actDead, 1)
}

func (m *Metrics) countPruned(n int64) {
	if m == nil {
		return
	}
	m.pruned.Add(float64(n))
}

func result(ok bool) string {
	if ok {
		return "succeeded"
	}
	return "failed"
}
