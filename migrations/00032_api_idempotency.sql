-- +goose Up

-- The answers of /api/v1's POSTs that carried an Idempotency-Key, kept 24
-- hours per token, in the database so that every replica gives the same
-- answer to the same key. A row whose status is NULL is a request still
-- running: the same key meanwhile is refused with a 409. request_hash is
-- the SHA-256 of the method, path and body: the same key with another
-- request is refused with a 422.
CREATE TABLE api_idempotency (
    token_id     bigint      NOT NULL,
    key          text        NOT NULL,
    request_hash bytea       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    status       integer,
    content_type text,
    body         bytea,
    PRIMARY KEY (token_id, key)
);
CREATE INDEX api_idempotency_created_at ON api_idempotency (created_at);

-- An API write names the token that made it, beside the token's account.
ALTER TABLE audit_log ADD COLUMN token_id bigint, ADD COLUMN token_name text;

-- +goose Down
ALTER TABLE audit_log DROP COLUMN token_name, DROP COLUMN token_id;
DROP TABLE api_idempotency;
