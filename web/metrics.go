package web

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/queue"
)

// QueueCollector exposes the queue depth by status, read from the database
// at each scrape, so every replica reports the one shared queue.
type QueueCollector struct {
	store  *queue.Store
	logger *slog.Logger
	depth  *prometheus.Desc
	due    *prometheus.Desc
	up     *prometheus.Desc
}

// NewQueueCollector returns a collector reading store's Stats.
func NewQueueCollector(logger *slog.Logger, store *queue.Store) *QueueCollector {
	return &QueueCollector{
		store:  store,
		logger: logger,
		depth: prometheus.NewDesc("hookd_queue_events",
			"Events on the retry queue by status (failed, retrying, dead).", []string{"status"}, nil),
		due: prometheus.NewDesc("hookd_queue_due_events",
			"Pending events whose next retry time has passed.", nil, nil),
		up: prometheus.NewDesc("hookd_queue_stats_up",
			"1 when the queue statistics could be read at this scrape, 0 otherwise.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (qc *QueueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- qc.depth
	ch <- qc.due
	ch <- qc.up
}

// Collect implements prometheus.Collector.
func (qc *QueueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := qc.store.Stats(ctx)
	if err != nil {
		qc.logger.WarnContext(ctx, "metrics: cannot read queue stats", "err", err)
		ch <- prometheus.MustNewConstMetric(qc.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(qc.up, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(qc.depth, prometheus.GaugeValue, float64(st.Failed), string(queue.StatusFailed))
	ch <- prometheus.MustNewConstMetric(qc.depth, prometheus.GaugeValue, float64(st.Retrying), string(queue.StatusRetrying))
	ch <- prometheus.MustNewConstMetric(qc.depth, prometheus.GaugeValue, float64(st.Dead), string(queue.StatusDead))
	ch <- prometheus.MustNewConstMetric(qc.due, prometheus.GaugeValue, float64(st.DueNow))
}
