-- +goose Up

-- The chart counts again, summed per hour: the 7-day chart reads 168 rows
-- per replica here instead of 10,080 from activity_minutes. A flush adds
-- its counts to both tables in one statement, each replica to rows of its
-- own. Hours start at whole hours of UTC, whatever the session's time zone.
CREATE TABLE activity_hours (
    hour          timestamptz NOT NULL,
    replica       text        NOT NULL,
    received      bigint      NOT NULL DEFAULT 0 CHECK (received >= 0),
    processed     bigint      NOT NULL DEFAULT 0 CHECK (processed >= 0),
    queued        bigint      NOT NULL DEFAULT 0 CHECK (queued >= 0),
    retried       bigint      NOT NULL DEFAULT 0 CHECK (retried >= 0),
    dead          bigint      NOT NULL DEFAULT 0 CHECK (dead >= 0),
    rejected      bigint      NOT NULL DEFAULT 0 CHECK (rejected >= 0),
    bad_signature bigint      NOT NULL DEFAULT 0 CHECK (bad_signature >= 0),
    PRIMARY KEY (hour, replica)
);

INSERT INTO activity_hours (hour, replica, received, processed, queued, retried, dead, rejected, bad_signature)
SELECT date_bin('1 hour', minute, timestamptz 'epoch'), replica, sum(received), sum(processed), sum(queued),
       sum(retried), sum(dead), sum(rejected), sum(bad_signature)
FROM activity_minutes
GROUP BY 1, 2;

-- +goose Down
DROP TABLE activity_hours;
