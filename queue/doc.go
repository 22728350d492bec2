// Package queue is hookd's durable state in PostgreSQL: the dedup markers that
// make a redelivered Stripe event a no-op, the per-event lease that keeps
// two runs of one event apart, and the retry queue that keeps every event
// whose processing failed until it succeeds or a person gives up on it. The
// dashboard's accounts and its audit log are stores of their own, in
// internal/store/accounts and internal/store/audit.
//
// Every timestamp is taken from the database's now(), so replicas on different
// machines share one clock.
//
// Each table has one file, which holds its rows' types and the statements
// that touch that table alone:
//
//	events.go        webhook_events: the retry queue's rows, lists, counts, RetryDead
//	markers.go       processed_webhook_events: the dedup markers, their prune and count
//	attempts.go      webhook_attempts: the attempt history and its prune
//	leases.go        webhook_leases: leases, and shortTx, the transaction they are taken in
//	replicas.go      hookd_replicas, lease_epoch: the beats that keep leases live, the grace after a loss
//	workerstatus.go  worker_status: what the retry loops and pruners last reported
//	activity.go      activity_minutes, activity_hours: the activity charts' counts
//	alerts.go        alert_conditions: the alerter's state
//	rejections.go    webhook_rejections: the deliveries the receiver refused
//	reconcile.go     reconcile_runs, and the reconcile run's lease
//
// The operations that must write several tables in one statement, so that
// an outcome, its marker or queue row, its attempt and its lease's release
// commit together, have a file each rather than being split by table:
//
//	receive.go    the receiver's short transaction (SettleAndTake), and the one
//	              read of an event's marker and queue state (markedSQL, queuedSQL)
//	retries.go    the retry loop's claim (ClaimAttempts), start (StartAttempts) and
//	              settle (SettleAttempts)
//	dashboard.go  an operator's actions on queue rows (RetryNow reads the lease)
//	search.go     where one event is, across the tables (FindEvent)
//
// The rest are rules and reads over webhook_events: policy.go is the
// backoff and MaxAttempts, stuck.go the stuck rule, failures.go the failure
// groups. seed.go holds the seed's single-event functions, which only the
// seed's contract tests call; it says what production calls instead.
// store.go is the Store itself; internal/store what it runs on.
package queue
