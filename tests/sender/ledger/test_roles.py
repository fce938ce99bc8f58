"""The ledger's job roles (sql/roles.sql): a sending host's role cannot delete the suppression list or rewrite rows."""

from __future__ import annotations

import psycopg
import pytest

from sender import Ledger


def _as(conn: psycopg.Connection, role: str, statement: str) -> None:
    with conn.transaction():
        conn.execute(f"SET LOCAL ROLE {role}")
        conn.execute(statement)


def test_agent_role_may_not_delete_suppressions_or_update_emails(ledger: Ledger, database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            _as(conn, "sendhost_agent", "DELETE FROM sender_suppressions")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            _as(conn, "sendhost_agent", "UPDATE sender_emails SET subject = subject")
        _as(conn, "sendhost_agent", "SELECT count(*) FROM sender_emails")  # it reads what it sends


def test_reader_role_may_read_but_not_call_state_changes(ledger: Ledger, database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        _as(conn, "sendhost_reader", "SELECT count(*) FROM sender_emails")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            _as(conn, "sendhost_reader", "INSERT INTO sender_suppressions (address) VALUES ('a@example.com')")


def test_ledger_functions_run_as_owner_with_a_pinned_search_path(ledger: Ledger, database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        loose = conn.execute(
            "SELECT count(*) FROM pg_proc WHERE pronamespace = current_schema()::regnamespace AND prokind = 'f'"
            " AND (NOT prosecdef OR proconfig IS NULL)").fetchone()
    assert loose == (0,)


def test_roles_apply_twice(ledger: Ledger) -> None:
    ledger.apply_roles()
    ledger.apply_roles()


def test_cli_roles_dry_run_prints_the_sql_and_apply_grants(cli, database_url: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert cli("sender", "--database-url", database_url, "migrate", cwd=tmp_path).returncode == 0
    dry = cli("sender", "--database-url", database_url, "roles", "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert "SECURITY DEFINER" in dry.stdout and "sendhost_agent" in dry.stdout
    applied = cli("sender", "--database-url", database_url, "roles", "--apply", cwd=tmp_path)
    assert applied.returncode == 0, applied.stderr
    neither = cli("sender", "--database-url", database_url, "roles", cwd=tmp_path)
    assert neither.returncode == 2 and "--dry-run" in neither.stderr


def _login_as(database_url: str, role: str) -> str:
    """A login user of this test's own, a member of `role` (roles are the cluster's, so its name is the database's),
    and its URL: what an operator gives a host (docs/security.md)."""
    info = psycopg.conninfo.conninfo_to_dict(database_url)
    user = f"{info['dbname']}_{role}"[:63]
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("DROP ROLE IF EXISTS {}").format(psycopg.sql.Identifier(user)))
        conn.execute(psycopg.sql.SQL("CREATE ROLE {} LOGIN PASSWORD 'pw' IN ROLE {}").format(
            psycopg.sql.Identifier(user), psycopg.sql.Identifier(role)))
    return f"postgresql://{user}:pw@{info.get('host', '127.0.0.1')}:{info.get('port', 5432)}/{info['dbname']}"


def test_agent_as_sendhost_agent_sends_each_row_exactly_once(world) -> None:  # type: ignore[no-untyped-def]
    import dataclasses
    import threading

    world.enqueue(3)
    agent_world = dataclasses.replace(world, database_url=_login_as(world.database_url, "sendhost_agent"))
    agent, factory = agent_world.agent()
    agent.run(factory, 2, once=True, stop=threading.Event())
    received = sorted(r.message["To"] for r in world.server.recorder.received)
    assert received == [f"lead{n}@rcpt.example" for n in range(3)]
    with psycopg.connect(world.database_url) as conn:
        statuses = conn.execute("SELECT status::text, count(*) FROM sender_emails GROUP BY 1").fetchall()
    assert statuses == [("sent", 3)]


def test_web_role_applies_an_unsubscribe_and_reader_counts_but_may_not_suppress(ledger: Ledger,
                                                                                database_url: str) -> None:
    from sender.errors import SenderError
    from sender.ledger.events import Event, Feedback

    ledger.enqueue(lead="L0", step=1, address="lead0@rcpt.example", group="sales", subject="Hi", text="x")
    (email_id,) = psycopg.connect(database_url).execute("SELECT id FROM sender_emails").fetchone()  # type: ignore[misc]
    with Feedback.from_url(_login_as(database_url, "sendhost_web")) as web:
        web.apply(email_id, Event.UNSUBSCRIBED, source="web", ref="t1")
    with Ledger.from_url(_login_as(database_url, "sendhost_reader")) as reader:
        assert sum(reader.counts().values()) == 1
        with pytest.raises((SenderError, psycopg.Error)):
            reader.suppress("other@example.com")
    with Ledger.from_url(_login_as(database_url, "sendhost_operator")) as operator:
        operator.suppress("other@example.com")
    with psycopg.connect(database_url) as conn:
        rows = conn.execute("SELECT address FROM sender_suppressions ORDER BY 1").fetchall()
    assert rows == [("lead0@rcpt.example",), ("other@example.com",)]


def test_agent_as_sendhost_agent_through_pgbouncer_sends_once_and_may_not_delete(  # type: ignore[no-untyped-def]
        tmp_path, redis_url, submission) -> None:
    import dataclasses
    import threading

    from tests.sender.world import make_world
    from tests.support.pgbouncer import bouncer_in_front_of_small_postgres

    with bouncer_in_front_of_small_postgres(logins=("agent_h1",)) as bouncer, bouncer.fresh_database() as database:
        world = make_world(tmp_path, bouncer.url(database), redis_url, submission)
        with psycopg.connect(bouncer.server_url(), autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'agent_h1'").fetchone():
                conn.execute("CREATE ROLE agent_h1 LOGIN IN ROLE sendhost_agent")
        agent_url = bouncer.url(database).replace("postgres@", "agent_h1@")
        world.enqueue(3)
        agent, factory = dataclasses.replace(world, database_url=agent_url).agent()
        agent.run(factory, 2, once=True, stop=threading.Event())
        assert sorted(r.message["To"] for r in submission.recorder.received) == [
            f"lead{n}@rcpt.example" for n in range(3)]
        with psycopg.connect(agent_url, autocommit=True, prepare_threshold=None) as conn:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("DELETE FROM sender_suppressions")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("UPDATE sender_emails SET subject = subject")
            assert conn.execute("SELECT current_user").fetchone() == ("agent_h1",)


def test_agent_role_keeps_its_inbox_place_but_may_not_delete_it(ledger: Ledger, database_url: str) -> None:
    from sender.ledger.events import Feedback

    with Feedback.from_url(_login_as(database_url, "sendhost_agent")) as inbox:
        inbox.set_inbox_mark("box0@sender.example", 7, 41)
        inbox.set_inbox_mark("box0@sender.example", 7, 42)
        assert inbox.inbox_mark("box0@sender.example") == (7, 42)
    with psycopg.connect(database_url, autocommit=True) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        _as(conn, "sendhost_agent", "DELETE FROM sender_inbox_marks")
