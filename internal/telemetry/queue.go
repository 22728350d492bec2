package telemetry

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookd/hookd/queue"
)

// QueueCollector exposes the queue depth by status, read from the database,
// so every replica reports the one shared queue.
//
// The statistics are read at most once per maxAge, however often and
// however many at once scrape: each read runs counts and a planner
// estimate, and a flood of scrapes must cost the database nothing more.
type QueueCollector struct {
	store  *queue.Store
	logger *slog.Logger
	maxAge time.Duration
	depth  *prometheus.Desc
	due    *prometheus.Desc
	sus    *prometheus.Desc
	up     *prometheus.Desc
	waits  *prometheus.Desc
	stands *prometheus.Desc
	// destDepth and destOldest are depth and the oldest pending
	// delivery's age, one series per destination.
	destDepth  *prometheus.Desc
	destOldest *prometheus.Desc
	// heldKeys is each destination's keys a dead event holds (order_by).
	heldKeys *prometheus.Desc

	// mu is held across a read, so concurrent scrapes wait for one read
	// rather than each making their own.
	mu     sync.Mutex
	readAt time.Time
	stats  queue.Stats
	err    error
	repl   queue.Replication
	replOK bool
	dests  []queue.DestinationStat
	destOK bool
}

// DefaultQueueStatsMaxAge is how long the statistics a scrape reports may
// be old: well under Prometheus's usual 15 s scrape interval.
const DefaultQueueStatsMaxAge = 5 * time.Second

// NewQueueCollector returns a collector reading store's Stats at most once
// per maxAge; zero means DefaultQueueStatsMaxAge.
func NewQueueCollector(logger *slog.Logger, store *queue.Store, maxAge time.Duration) *QueueCollector {
	return &QueueCollector{
		store:  store,
		logger: logger,
		maxAge: cmp.Or(maxAge, DefaultQueueStatsMaxAge),
		depth: prometheus.NewDesc(string(metricQueueEvents),
			"Events on the retry queue by status (failed, retrying, dead).", []string{"status"}, nil),
		due: prometheus.NewDesc(string(metricQueueDueEvents),
			"Pending events whose next retry time has passed.", nil, nil),
		sus: prometheus.NewDesc(string(metricQueueSuspects),
			"Events a crash of hookd cut short that wait to run alone (or died running alone): suspects.", nil, nil),
		up: prometheus.NewDesc(string(metricQueueStatsUp),
			"1 when the queue statistics could be read at this scrape, 0 otherwise.", nil, nil),
		waits: prometheus.NewDesc(string(metricCommitWaitsForStandby),
			"1 when a commit waits for a standby (synchronous_commit and synchronous_standby_names), 0 when it waits "+
				"for none: a failover can then lose events answered 200.", nil, nil),
		stands: prometheus.NewDesc(string(metricDatabaseStandbys),
			"Standbys streaming from the database, by whether a commit waits for them (sync) or not (async).",
			[]string{"sync"}, nil),
		destDepth: prometheus.NewDesc(string(metricDestinationQueueEvents),
			"Deliveries on the retry queue by destination and status (failed, retrying, dead): every configured "+
				"destination, retired ones included, at 0 when none of its deliveries is queued.",
			[]string{"destination", "status"}, nil),
		destOldest: prometheus.NewDesc(string(metricDestinationOldestPending),
			"Seconds the oldest pending (failed or retrying) delivery of each destination has waited since it was "+
				"received; 0 when none is pending.", []string{"destination"}, nil),
		heldKeys: prometheus.NewDesc(string(metricOrderHeldKeys),
			"Keys of each destination with order_by that a dead event holds: their later deliveries wait until it is "+
				"retried or the key is released; 0 for a destination without order_by.", []string{"destination"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (qc *QueueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- qc.depth
	ch <- qc.due
	ch <- qc.sus
	ch <- qc.up
	ch <- qc.waits
	ch <- qc.stands
	ch <- qc.destDepth
	ch <- qc.destOldest
	ch <- qc.heldKeys
}

// Collect implements prometheus.Collector.
func (qc *QueueCollector) Collect(ch chan<- prometheus.Metric) {
	st, err := qc.read()
	if err != nil {
		ch <- prometheus.MustNewConstMetric(qc.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(qc.up, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(qc.depth, prometheus.GaugeValue, float64(st.Failed), string(queue.StatusFailed))
	ch <- prometheus.MustNewConstMetric(qc.depth, prometheus.GaugeValue, float64(st.Retrying), string(queue.StatusRetrying))
	ch <- prometheus.MustNewConstMetric(qc.depth, prometheus.GaugeValue, float64(st.Dead), string(queue.StatusDead))
	ch <- prometheus.MustNewConstMetric(qc.due, prometheus.GaugeValue, float64(st.DueNow))
	ch <- prometheus.MustNewConstMetric(qc.sus, prometheus.GaugeValue, float64(st.Suspects))
	qc.mu.Lock()
	r, ok := qc.repl, qc.replOK
	dests, destOK := qc.dests, qc.destOK
	qc.mu.Unlock()
	if destOK {
		qc.collectDestinations(ch, dests)
	}
	if ok {
		waits := 0.0
		if r.Waits() {
			waits = 1
		}
		ch <- prometheus.MustNewConstMetric(qc.waits, prometheus.GaugeValue, waits)
		ch <- prometheus.MustNewConstMetric(qc.stands, prometheus.GaugeValue, float64(len(r.Sync)), "sync")
		ch <- prometheus.MustNewConstMetric(qc.stands, prometheus.GaugeValue, float64(len(r.Async)), "async")
	}
}

// read returns the statistics, read afresh only when the last read is older
// than maxAge. A failed read is kept as long, so an unreachable database is
// not asked again at every scrape either.
func (qc *QueueCollector) read() (queue.Stats, error) {
	qc.mu.Lock()
	defer qc.mu.Unlock()
	if !qc.readAt.IsZero() && time.Since(qc.readAt) < qc.maxAge {
		return qc.stats, qc.err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	qc.stats, qc.err = qc.store.Stats(ctx)
	if qc.err == nil {
		var err error
		qc.repl, err = qc.store.Replication(ctx)
		qc.replOK = err == nil
		if err != nil {
			qc.logger.WarnContext(ctx, "metrics: cannot read what a commit waits for", "err", err)
		}
		qc.dests, err = qc.store.DestinationStats(ctx)
		qc.destOK = err == nil
		if err != nil {
			qc.logger.WarnContext(ctx, "metrics: cannot read the queue by destination", "err", err)
		}
	}
	qc.readAt = time.Now()
	if qc.err != nil {
		qc.logger.WarnContext(ctx, "metrics: cannot read queue stats", "err", qc.err)
	}
	return qc.stats, qc.err
}

// collectDestinations sends each destination's depth by status, its
// oldest pending delivery's age, as of now, and its held keys.
func (qc *QueueCollector) collectDestinations(ch chan<- prometheus.Metric, dests []queue.DestinationStat) {
	now := time.Now()
	for _, d := range dests {
		for _, n := range []struct {
			status queue.Status
			count  int64
		}{{queue.StatusFailed, d.Failed}, {queue.StatusRetrying, d.Retrying}, {queue.StatusDead, d.Dead}} {
			ch <- prometheus.MustNewConstMetric(qc.destDepth, prometheus.GaugeValue, float64(n.count), d.Destination, string(n.status))
		}
		age := 0.0
		if d.Oldest != nil {
			age = max(now.Sub(*d.Oldest).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(qc.destOldest, prometheus.GaugeValue, age, d.Destination)
		ch <- prometheus.MustNewConstMetric(qc.heldKeys, prometheus.GaugeValue, float64(d.HeldKeys), d.Destination)
	}
}
