// Package queue is hookd's durable state of events in PostgreSQL: the dedup
// markers that make a redelivered Stripe event a no-op, the per-event lease
// that keeps two runs of one event apart, and the retry queue that keeps every
// event whose processing failed until it succeeds or a person gives up on it.
// Every other table has its store under internal/store.
package queue

// Every timestamp is taken from the database's now(), so replicas on different
// machines share one clock.
//
// Each table has one file, which holds its rows' types and the statements
// that touch that table alone:
//
//	events.go           webhook_events: the retry queue's rows, lists, counts, RetryDead,
//	                    and the dead events' announcement (Tx.TakeNewlyDead)
//	markers.go          processed_webhook_events: the dedup markers, their prune and count
//	eventlog.go         processed_webhook_events' event log columns: the payloads kept,
//	                    their prune and erasure, History and LogEntry
//	attempts.go         webhook_attempts: the attempt history and its prune
//	leases.go           webhook_leases: leases, and shortTx, the transaction they are taken in
//	replicas.go         hookd_replicas, lease_epoch: the beats that keep leases live, the grace after a loss
//	deliverycontrol.go  delivery_control: a person's pause and the circuit breaker
//	destinations_page.go destinations with webhook_events and webhook_attempts: the
//	                    destinations page's reads, a destination's pause, and a
//	                    retired one's deliveries moved or dropped
//	destinations_managed.go destinations added on the dashboard: their sealed secrets,
//	                    add, edit, remove, and the set they make (ManagedSet)
//	endpoints.go        endpoint_activity, event_pairs: what came through each endpoint, the thin/snapshot pairs
//	replays.go          replays, replay_events: a replay's members, its claim and its settle
//	workerstatus.go     worker_status: what the retry loops and pruners last reported
//	timeline.go         database_timeline: the WAL timeline, which a failover changes (NoteTimeline)
//	destinations.go     destinations: each one's applied configuration, pause and breaker,
//	                    and the hash each live replica applied (ReplicaDestinationHashes)
//	routemisses.go      webhook_route_misses: the destinations whose filter failed on an event
//	rates.go            destination_rates: the calls reserved under a destination's shared rate
//	orderkeys.go        webhook_order_leases with the queue: an ordered destination's keys,
//	                    their turns (TakeOrderTurn), the claim of their heads, held keys
//	heldkeys.go         webhook_events' held keys: one key's read (HeldKey), their count,
//	                    and the newly held keys' announcement (Tx.TakeNewlyHeld)
//
// The operations that must write several tables in one statement, so that
// an outcome, its marker or queue row, its attempt and its lease's release
// commit together, have a file each rather than being split by table:
//
//	receive.go    the receiver's short transaction (Exchange), and the one
//	              read of an event's marker and queue state (markedSQL, queuedSQL)
//	ungranted.go  a new event queued while no lease can be granted (QueueUngranted)
//	retries.go    the retry loop's claim (ClaimAttempts), and its settle and start
//	              (SettleAndStart)
//	suspects.go   webhook_suspects with the queue and the leases: runs a dead
//	              process cut short, the suspect slot, the claim of a suspect to
//	              run alone (ClaimSuspect, ClaimReplaySuspect), charged only when
//	              it crashes hookd
//	fenced.go     webhook_fence_cuts with the suspects and the queue: runs the
//	              fence stopped, counted in their settle; the second makes a suspect
//	dashboard.go  an operator's actions on queue rows (RetryNow reads the lease)
//	search.go     where one event is, across the tables (Locate, FindEvent)
//	reconcile.go  reconciliation's reads: the database's clock, which events it has seen
//
// deliveries.go is the key a delivery (an event to one destination) goes by.
// The rest are rules and reads over webhook_events: policy.go is the
// backoff, MaxAttempts and the pending rule, stuck.go the stuck rule,
// failures.go the failure groups, pending.go the oldest pending event,
// deliveries.go the delivery key of an event and a destination.
// reads.go is the dashboard's time-limited, read-only Store (NewReader).
// replication.go reads what a commit waits for (synchronous standbys).
// The seed's single-event functions, which only tests call, are
// queuetest.Seed's. store.go is the Store itself; internal/store what it
// runs on.
