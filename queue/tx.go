package queue

import "github.com/jackc/pgx/v5"

// PgxTx returns the transaction of a Tx from InTx or TryLockEvent, for the
// writes of other stores that must commit with the queue's: an operator's
// action and its audit entry (audit.Record) commit together or not at all.
// BeginEvent's pipelined transaction carries only the receiver's own
// statements and has none to give; asking for it is a programming error.
func (t *Tx) PgxTx() pgx.Tx {
	p, ok := t.tx.(pgxTx)
	if !ok {
		panic("queue: PgxTx on BeginEvent's pipelined transaction")
	}
	return p.Tx
}
