-- Named queries of the schema's versions (sender.ledger.migrate); loaded with queries.sql.

-- name: migrate_lock
-- Held while migrating (a session lock: the migration files commit one by one): a second process waits for the
-- first, then finds nothing to do.
SELECT pg_advisory_lock(%(key)s);

-- name: migrate_unlock
SELECT pg_advisory_unlock(%(key)s);

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
