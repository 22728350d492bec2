-- +goose Up

-- Leases survive a crash of the database and a failover to a standby. As
-- an unlogged table (00013) webhook_leases was emptied by crash recovery
-- and was empty on a promoted standby, so an app call running at that
-- moment could overlap a redelivery of its event on another replica. A
-- logged table keeps every lease whose take reached the WAL; the
-- transactions that only take leases commit without waiting for the flush
-- (queue.leasePlansSQL), so what a crash can still lose is the last moment
-- of takes, not every live lease. Rewriting the table is quick: it holds
-- only the leases of events in flight and those not yet vacuumed.
ALTER TABLE webhook_leases SET LOGGED;

-- +goose Down
ALTER TABLE webhook_leases SET UNLOGGED;
