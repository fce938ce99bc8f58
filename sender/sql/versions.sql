-- Named queries of the schema's versions (sender.ledger.migrate); loaded with queries.sql.

-- name: migrate_lock
-- Taken by each of migrate's transactions, released by its commit or rollback: a transaction-level lock, since a
-- session lock would stay on whichever server connection PgBouncer (transaction mode) lent that transaction.
SELECT pg_advisory_xact_lock(%(key)s);

-- name: local_statement_timeout
-- For the rest of this transaction only (set_config's is_local): a session setting would outlive it on the
-- server connection PgBouncer lent it, for whoever borrows that connection next.
SELECT set_config('statement_timeout', %(ms)s, true);

-- name: versions_table
CREATE TABLE IF NOT EXISTS sender_schema_versions (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: has_versions_table
SELECT to_regclass('sender_schema_versions') IS NOT NULL;

-- name: schema_version
SELECT coalesce(max(version), 0) FROM sender_schema_versions;

-- name: record_version
INSERT INTO sender_schema_versions (version, name) VALUES (%(version)s, %(name)s) ON CONFLICT (version) DO NOTHING;

-- name: make_partitions
-- The history's months through two months ahead of now (schema.sql, sender_make_partitions): how many were made.
SELECT sender_make_partitions(coalesce(%(now)s, now()) + interval '2 months', %(now)s);

-- name: retire_history
-- Drop whole months of history before %(before)s (sender_retire_history): one row per month dropped.
SELECT history, month_start, entries FROM sender_retire_history(%(before)s);
