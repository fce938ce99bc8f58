-- Ledger roles, one per job (docs/security.md). Applied after the migrations, every time: idempotent, so it also
-- covers functions a later migration adds. Roles are NOLOGIN group roles (cluster-wide, no password here): the
-- operator grants each to a login user of their own. Grants are per database, in the ledger's schema.
DO $roles$
DECLARE
    r text;
BEGIN
    -- roles are cluster-wide: two databases migrating at once may race to create one; the lock makes them take turns
    PERFORM pg_advisory_xact_lock(8319395793566789484);
    FOREACH r IN ARRAY ARRAY['sendhost_agent', 'sendhost_web', 'sendhost_reader', 'sendhost_operator'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL;  -- created by a process that did not take our lock: as good as ours
            END;
        END IF;
    END LOOP;
END
$roles$;

DO $grants$
DECLARE
    s text := current_schema();
    f record;
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO sendhost_agent, sendhost_web, sendhost_reader, sendhost_operator', s);
    -- no direct writes for any job role: every state change is a function, run as its owner
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM PUBLIC, sendhost_agent, sendhost_web, '
                   'sendhost_reader, sendhost_operator', s);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA %I FROM PUBLIC, sendhost_agent, sendhost_web, '
                   'sendhost_reader, sendhost_operator', s);
    -- reading: the agent reads what it sends, the web service finds a token's row and counts metrics, the reader
    -- and the operator read everything
    EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA %I TO sendhost_agent, sendhost_web, sendhost_reader, '
                   'sendhost_operator', s);
    -- the one direct write left: `sender inbox` (on the sending host, as the agent) keeps its place per mailbox
    -- (set_inbox_mark in feedback.sql); a bookmark of its own, not a row it sends or a suppression
    EXECUTE format('GRANT INSERT (mailbox, uidvalidity, last_uid, updated_at), UPDATE (uidvalidity, last_uid, '
                   'updated_at) ON %I.sender_inbox_marks TO sendhost_agent', s);
    FOR f IN
        SELECT p.oid::regprocedure AS sig, p.proname::text AS name, p.provolatile AS volatile
        FROM pg_proc p
        WHERE p.pronamespace = s::regnamespace AND p.prokind = 'f'
          AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
    LOOP
        EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = %I, pg_temp', f.sig, s);
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f.sig);
        IF f.name IN ('sender_reclassify') THEN
            -- a person's verdicts are the operator's alone: no process on a sending host or the web gives them
            EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM sendhost_agent, sendhost_web', f.sig);
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO sendhost_operator', f.sig);
            CONTINUE;
        END IF;
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO sendhost_agent, sendhost_web, sendhost_operator', f.sig);
        -- the reader: functions that cannot write (not volatile), and the counters' read (it folds the pending
        -- changes into the totals first: derived data, the same whoever folds it)
        IF f.volatile <> 'v' OR f.name IN ('sender_counted') THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO sendhost_reader', f.sig);
        END IF;
    END LOOP;
END
$grants$;
