-- +goose Up

-- Keys hookd signs with that every replica must share, made by the first
-- replica that needs one. 'csrf' signs the sign-in form's token, which
-- lives in a cookie rather than in a stored session, so a visit to the
-- sign-in page writes nothing.
CREATE TABLE signing_keys (
    name       text        PRIMARY KEY,
    key        bytea       NOT NULL CHECK (length(key) >= 32),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE signing_keys;
