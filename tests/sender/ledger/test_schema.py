"""schema.sql is the current schema: a fresh database made from it and a version-1 database brought up by every
migration have the same catalogue, and the Python enums are the database's statuses, events and ranks."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from pprint import pformat
from typing import Any

import psycopg
import pytest

from sender import Ledger, Status
from sender.ledger.events import Event
from sender.ledger.migrate import BASELINE_VERSION, latest_version
from sender.ledger.queries import migrations, named_queries, queries, query, sql_text
from tests.support.postgres_server import fresh_database

# What a schema is, read from the catalogue of the public schema: each part as (key, definition) rows.
CATALOGUE: dict[str, str] = {
    "tables": """
        SELECT c.relname, c.relkind::text FROM pg_class c
        WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')""",
    "columns": """
        SELECT c.relname || '.' || a.attname,
               concat_ws(' | ', a.attnum::text, format_type(a.atttypid, a.atttypmod),
                         CASE WHEN a.attnotnull THEN 'NOT NULL' ELSE 'NULL' END,
                         pg_get_expr(d.adbin, d.adrelid), NULLIF(a.attidentity::text, ''),
                         NULLIF(a.attgenerated::text, ''))
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm')
          AND a.attnum > 0 AND NOT a.attisdropped""",
    "constraints": """
        SELECT conrelid::regclass::text || '.' || conname, contype::text || ' ' || pg_get_constraintdef(oid)
        FROM pg_constraint WHERE connamespace = 'public'::regnamespace
          AND contype <> 'n'  -- NOT NULL is in the columns' entries; its name (PG 18) follows a rename's order""",
    "indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'",
    "functions": """
        SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid) FROM pg_proc p
        WHERE p.pronamespace = 'public'::regnamespace""",
    "types": """
        SELECT t.typname, t.typtype::text || ' ' || coalesce(
            (SELECT string_agg(e.enumlabel, ', ' ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = t.oid),
            '')
        FROM pg_type t WHERE t.typnamespace = 'public'::regnamespace""",
    "triggers": """
        SELECT tgrelid::regclass::text || '.' || tgname, pg_get_triggerdef(oid) FROM pg_trigger
        WHERE NOT tgisinternal AND tgrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'public'::regnamespace)""",
    "views": "SELECT viewname, definition FROM pg_views WHERE schemaname = 'public'",
}


def catalogue(url: str) -> dict[str, dict[str, Any]]:
    with psycopg.connect(url) as conn:
        return {part: dict(conn.execute(sql).fetchall()) for part, sql in CATALOGUE.items()}


def _at_version(url: str, version: int) -> None:
    """The database as the sendhost of `version` left it: the version-1 baseline, the migrations up to
    `version`, each recorded as that sendhost's migrate recorded it."""
    # One transaction per file, as migrate applies them: version 6 uses enum values that earlier files added.
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(query("versions_table"))
        for number, name, text in migrations():
            if number <= version:
                with conn.transaction():
                    conn.execute(text)
                    conn.execute(query("record_version"),
                                 {"version": number, "name": "schema.sql" if number == BASELINE_VERSION else name})


@pytest.fixture
def fresh(postgres_admin: str) -> Iterator[str]:
    with fresh_database(postgres_admin) as url:
        with Ledger.from_url(url) as ledger:
            result = ledger.migrate()
        assert result.applied == ("schema.sql",)
        yield url


def _diff(left: dict[str, dict[str, Any]], right: dict[str, dict[str, Any]]) -> str:
    return "\n".join(difflib.unified_diff(pformat(left, width=200).splitlines(), pformat(right, width=200).splitlines(),
                                          "schema.sql", "migrated", lineterm=""))


# Every version a sendhost shipped (the numbers of the migration files: not every number is one, as a branch may
# take a later one), below the latest.
@pytest.mark.parametrize("version", sorted({number for number, _name, _text in migrations()})[:-1])
def test_an_older_ledger_migrated_is_the_schema_sql_catalogue(version: int, fresh: str, postgres_admin: str) -> None:
    expected = catalogue(fresh)
    assert all(expected[part] for part in ("tables", "columns", "constraints", "indexes", "functions", "types",
                                           "triggers")), "the catalogue queries read nothing"
    with fresh_database(postgres_admin) as url:
        _at_version(url, version)
        with Ledger.from_url(url) as ledger:
            result = ledger.migrate()
        names = [name for number, name, _text in migrations() if number > version]
        assert (result.before, result.after, result.applied) == (version, latest_version(), tuple(names))
        with psycopg.connect(url) as conn:
            recorded = [v for (v,) in conn.execute("SELECT version FROM sender_schema_versions ORDER BY version")]
        assert recorded == sorted({number for number, _name, _text in migrations()})
        migrated = catalogue(url)
    assert migrated == expected, _diff(expected, migrated)


def test_a_fresh_ledger_records_the_latest_version(fresh: str) -> None:
    with psycopg.connect(fresh) as conn:
        assert conn.execute("SELECT version, name FROM sender_schema_versions").fetchall() == [
            (latest_version(), "schema.sql")]


def test_schema_sql_names_its_version() -> None:
    assert f"version {latest_version()}:" in sql_text("schema.sql").splitlines()[0]


def test_the_statuses_and_their_ranks_are_the_databases(fresh: str) -> None:
    with Ledger.from_url(fresh) as ledger:
        ranks = ledger.status_ranks()
    with psycopg.connect(fresh) as conn:
        labels = [label for (label,) in conn.execute("SELECT unnest(enum_range(NULL::sender_status))::text")]
        ranked = dict(conn.execute("SELECT s::text, sender_rank(s) FROM unnest(enum_range(NULL::sender_status)) s"))
    # One list: every status of the enum, in the enum's order, is ranked once by sender_status_ranks, and
    # sender_rank (what the guard and every function reads) answers from it.
    assert labels == [s.value for s in Status]
    assert {s.value: rank for s, rank in ranks.items()} == ranked
    assert set(ranks) == set(Status)
    assert ranks[Status.SENT] > max(ranks[s] for s in (Status.UNCONFIRMED, Status.FAILED, Status.SENDING))


def test_the_events_are_the_databases(fresh: str) -> None:
    with psycopg.connect(fresh) as conn:
        (check,) = conn.execute("SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                                "WHERE conname = 'sender_feedback_event_check'").fetchone() or ("",)
    allowed = re.findall(r"'([a-z_]+)'::text", check)
    assert sorted(allowed) == sorted(e.value for e in Event)
    # An event named as a status sets it; the others are recorded only.
    assert {e for e in Event if e.value in {s.value for s in Status}} == {
        Event.SENT, Event.DELIVERED, Event.REPLIED, Event.BOUNCED, Event.UNSUBSCRIBED, Event.COMPLAINED}


def test_every_named_query_file_is_loaded_and_a_name_is_given_once() -> None:
    assert {"enqueue", "apply_event", "schema_version", "oldest_due_age"} <= set(queries())
    with pytest.raises(ValueError, match="'ping' is named twice"):
        named_queries("-- name: ping\nSELECT 1;\n-- name: ping\nSELECT 2;\n")


def test_an_upgrade_to_version_9_remembers_when_row_id_tokens_stopped(fresh: str, postgres_admin: str) -> None:
    """The web service reads a row-id token only for mail sent before this moment (feedback.sql): a ledger brought
    up from version 7 has it, a fresh one (whose agent never wrote such a token) has none."""
    query_moment = ("SELECT to_timestamp(value::double precision) FROM sender_settings "
                    "WHERE name = 'row_id_tokens_before'")
    with psycopg.connect(fresh) as conn:
        assert conn.execute(query_moment).fetchone() is None
    with fresh_database(postgres_admin) as url:
        _at_version(url, 7)
        with Ledger.from_url(url) as ledger:
            ledger.migrate()
        with psycopg.connect(url) as conn:
            (moment,) = conn.execute(query_moment).fetchone() or (None,)
            (now,) = conn.execute("SELECT now()").fetchone() or (None,)
    assert moment is not None and now is not None and moment <= now


def test_an_upgrade_to_version_22_keeps_each_row_with_its_lead_and_the_callers_id_as_lead(postgres_admin: str) -> None:
    """Version 21 keyed a lead by its address in a campaign file's campaign (the caller's id in `ref`) and by the
    caller's id in `enqueue`; version 22's rows name their lead record, and `lead` is the caller's id in both."""
    with fresh_database(postgres_admin) as url:
        _at_version(url, 21)
        with psycopg.connect(url, autocommit=True) as conn:
            (campaign,) = conn.execute("INSERT INTO sender_campaigns (name, mailbox_group) VALUES ('q1', 'sales') "
                                       "RETURNING id").fetchone() or (0,)
            conn.execute("INSERT INTO sender_leads (campaign_id, lead, address, ref) VALUES "
                         "(%(c)s, 'ann@rcpt.example', 'ann@rcpt.example', 'crm-1'), "
                         "(%(c)s, 'bob@rcpt.example', 'bob@rcpt.example', NULL)", {"c": campaign})
            conn.execute("INSERT INTO sender_emails (campaign_id, lead, step, recipient, mailbox_group, subject, body) "
                         "SELECT %s, lead, 1, address, 'sales', 'Hi', 'x' FROM sender_leads", (campaign,))
            conn.execute("SELECT sender_enqueue('E1', 1, 'ann@rcpt.example', 'sales', 'Hi', 'x', NULL, true)")
        with Ledger.from_url(url) as ledger:
            ledger.migrate()
        with psycopg.connect(url) as conn:
            rows = conn.execute("SELECT c.name, l.kind, l.lead, l.address, e.address, e.step FROM sender_emails e "
                                "JOIN sender_leads l ON l.id = e.lead_id JOIN sender_campaigns c "
                                "ON c.id = e.campaign_id ORDER BY e.id").fetchall()
    assert rows == [("q1", "file", "crm-1", "ann@rcpt.example", "ann@rcpt.example", 1),
                    ("q1", "file", None, "bob@rcpt.example", "bob@rcpt.example", 1),
                    ("enqueue", "enqueue", "E1", "ann@rcpt.example", "ann@rcpt.example", 1)]
