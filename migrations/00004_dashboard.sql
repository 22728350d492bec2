-- +goose Up

-- Dashboard accounts. Emails are compared without case, so "Ana@x" and
-- "ana@x" are one account.
CREATE TABLE users (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email         text        NOT NULL CHECK (email <> ''),
    -- PHC string: $argon2id$v=19$m=...,t=...,p=...$salt$hash
    password_hash text        NOT NULL,
    role          text        NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

-- scs sessions, in the shape github.com/alexedwards/scs/pgxstore expects.
CREATE TABLE sessions (
    token  text        PRIMARY KEY,
    data   bytea       NOT NULL,
    expiry timestamptz NOT NULL
);
CREATE INDEX sessions_expiry_idx ON sessions (expiry);

-- Failed sign-ins per account ("email:...") and per client address
-- ("ip:..."), so guessing passwords gets slower with every miss, on every
-- replica alike.
CREATE TABLE login_failures (
    key            text        PRIMARY KEY,
    failures       integer     NOT NULL,
    last_failed_at timestamptz NOT NULL
);

-- Who did what from the dashboard. The email is copied rather than
-- referenced so the record outlives the account.
CREATE TABLE audit_log (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    user_email text        NOT NULL,
    action     text        NOT NULL
                           CHECK (action IN ('login', 'logout', 'retry', 'retry_all', 'retry_now', 'prune')),
    target     text        NOT NULL DEFAULT '',
    count      bigint      NOT NULL DEFAULT 0
);
CREATE INDEX audit_log_at_idx ON audit_log (at DESC, id DESC);

-- The pending lists (failed, retrying) in the order they are due. The claim
-- index webhook_events_due_idx cannot serve them: its attempts < 5 predicate
-- is not implied by a filter on status alone.
CREATE INDEX webhook_events_pending_idx ON webhook_events (status, next_retry_at, id)
    WHERE status IN ('failed', 'retrying');

-- The list of all pending events, both statuses, in the order they are due,
-- is served by webhook_events_due_idx.

-- The overview's oldest pending event, found at the end of an index instead
-- of by reading every pending row.
CREATE INDEX webhook_events_pending_created_idx ON webhook_events (created_at)
    WHERE status IN ('failed', 'retrying');

-- +goose Down
DROP INDEX webhook_events_pending_created_idx;
DROP INDEX webhook_events_pending_idx;
DROP TABLE audit_log;
DROP TABLE login_failures;
DROP TABLE sessions;
DROP TABLE users;
