"""`sendhost sender unconfirmed --look` and `resolve --from-sent` against a real IMAP server (dovecot, TLS from a
trustme CA) and a real ledger: a copy with the row's Message-ID in the mailbox's Sent folder is found, a row
without one is not, a mailbox that cannot be searched is "couldn't look" (never "not found") and is left
unresolved, and the folder is left exactly as it was."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from subprocess import CompletedProcess

import psycopg
import pytest

from sender import Ledger
from tests.sender.attempts import unconfirmed
from tests.support.dovecot import Dovecot, dovecot_server

Cli = Callable[..., CompletedProcess[str]]
BOX0, BOX1, BOX2, BOX3 = (f"box{n}@sender.example" for n in range(4))
PASSWORDS = {BOX0: "imap-pw-0", BOX1: "imap-pw-1"}
SENT = "Outgoing"  # marked \Sent, and a name no list of usual names holds: only the attribute finds it


@pytest.fixture(scope="module")
def imap() -> Iterator[Dovecot]:
    with dovecot_server(PASSWORDS, special_use={SENT: "\\Sent"}) as server:
        yield server


@pytest.fixture(scope="module")
def plain_imap() -> Iterator[Dovecot]:
    """A server that marks no folder \\Sent."""
    with dovecot_server(PASSWORDS) as server:
        yield server


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never says a word."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield listener.getsockname()[1]


def _mailbox(tmp: Path, address: str, imap: str | None, password: str = "") -> str:
    secret = tmp / f"{address}.pw"
    secret.write_text((password or PASSWORDS.get(address, "unused")) + "\n")
    secret.chmod(0o600)
    return (f"      - address: {address}\n        domain: sender.example\n        start: '2026-01-01'\n"
            f"        group: sales\n"
            f"        smtp: {{host: 127.0.0.1, port: 587, username: {address}, password_file: '{secret}'}}\n"
            + (f"        imap: {{{imap}}}\n" if imap else ""))


def _imap(server: Dovecot, *, starttls: bool = False, extra: str = "") -> str:
    port = server.starttls_port if starttls else server.imaps_port
    return (f"host: 127.0.0.1, port: {port}, security: {'starttls' if starttls else 'tls'}, "
            f"ca_file: '{server.ca_file}'" + (f", {extra}" if extra else ""))


def _inventory(tmp: Path, *mailboxes: str) -> Path:
    path = tmp / "inventory.yml"
    path.write_text("all:\n  vars:\n    sendhost_mailboxes:\n" + "".join(mailboxes) +
                    "  children:\n    senders:\n      hosts: {}\n")
    return path


@pytest.fixture
def look(cli: Cli, database_url: str, tmp_path: Path, ledger: Ledger) -> Callable[..., CompletedProcess[str]]:
    def run(inventory: Path, *args: str) -> CompletedProcess[str]:
        return cli("--inventory", str(inventory), "sender", "--database-url", database_url, *args, cwd=tmp_path)
    return run


def _copy(message_id: str, to: str = "eve@rcpt.example") -> bytes:
    """The copy a provider keeps of a message it took by submission."""
    return (f"From: box@sender.example\r\nTo: {to}\r\nSubject: Hello\r\nMessage-ID: {message_id}\r\n"
            "Date: Mon, 02 Mar 2026 09:00:00 +0000\r\n\r\nHi\r\n").encode()


def _found(result: CompletedProcess[str], key: str = "unconfirmed") -> dict[int, dict[str, str | None]]:
    return {row["id"]: row["sent_folder"] for row in json.loads(result.stdout)[key]}


def _table(text: str) -> list[list[str]]:
    """The cells of each row of a table as printed."""
    return [[cell.strip() for cell in line.strip("│").split("│")] for line in text.splitlines()
            if line.startswith("│")]


def _status(database_url: str, row: int) -> str:
    with psycopg.connect(database_url) as conn:
        found = conn.execute("SELECT status::text FROM sender_emails WHERE id = %s", (row,)).fetchone()
    assert found is not None
    return str(found[0])


def test_a_copy_in_the_sent_folder_is_found_and_a_row_without_one_is_not(
        imap: Dovecot, look: Cli, ledger: Ledger, tmp_path: Path) -> None:
    copied, copied_id = unconfirmed(ledger, "L1", BOX0)
    lost, lost_id = unconfirmed(ledger, "L2", BOX0, address="bob@rcpt.example")
    imap.append(BOX0, _copy(copied_id), SENT)
    imap.append(BOX0, _copy(lost_id))  # in the inbox, not the Sent folder: it says nothing about the send
    inventory = _inventory(tmp_path, _mailbox(tmp_path, BOX0, _imap(imap)))
    result = look(inventory, "unconfirmed", "--look", "--format", "json")
    assert result.returncode == 0, result.stderr
    assert _found(result) == {copied: {"result": "found", "mailbox": BOX0, "folder": SENT, "why": None},
                              lost: {"result": "not_found", "mailbox": BOX0, "folder": SENT, "why": None}}
    table = look(inventory, "unconfirmed", "--look")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert any(copied_id in line and f"found in {SENT}" in line for line in lines)
    assert any(lost_id in line and f"not in {SENT}" in line for line in lines)


def test_looking_leaves_the_sent_folder_as_it_was(imap: Dovecot, look: Cli, ledger: Ledger, tmp_path: Path) -> None:
    _row, message_id = unconfirmed(ledger, "L1", BOX1)
    imap.append(BOX1, _copy(message_id), SENT)
    before = imap.flags(BOX1, SENT)
    assert before and all(b"\\Recent" in item and b"\\Seen" not in item for item in before)  # SELECT would clear it
    inventory = _inventory(tmp_path, _mailbox(tmp_path, BOX1, _imap(imap, starttls=True)))
    result = look(inventory, "unconfirmed", "--look", "--format", "json")
    assert result.returncode == 0, result.stderr
    assert [f["result"] for f in _found(result).values() if f] == ["found"]
    assert imap.flags(BOX1, SENT) == before


def test_one_session_per_mailbox_whatever_its_rows(imap: Dovecot, look: Cli, ledger: Ledger, tmp_path: Path) -> None:
    ids = [unconfirmed(ledger, f"L{n}", BOX0, address=f"r{n}@rcpt.example")[1] for n in range(3)]
    for message_id in ids[:2]:
        imap.append(BOX0, _copy(message_id), SENT)
    logins = imap.log().count(f"Login: user=<{BOX0}>")
    result = look(_inventory(tmp_path, _mailbox(tmp_path, BOX0, _imap(imap))), "unconfirmed", "--look",
                  "--format", "json")
    assert result.returncode == 0, result.stderr
    assert sorted(str(f["result"]) for f in _found(result).values() if f) == ["found", "found", "not_found"]
    deadline = time.monotonic() + 5
    while imap.log().count(f"Login: user=<{BOX0}>") == logins and time.monotonic() < deadline:
        time.sleep(0.05)  # dovecot's log process writes a moment later
    time.sleep(0.2)
    assert imap.log().count(f"Login: user=<{BOX0}>") == logins + 1


def test_a_refused_login_is_couldnt_look_and_the_other_mailbox_is_still_searched(
        imap: Dovecot, look: Cli, ledger: Ledger, tmp_path: Path) -> None:
    refused, refused_id = unconfirmed(ledger, "L1", BOX1)
    found, found_id = unconfirmed(ledger, "L2", BOX0, address="bob@rcpt.example")
    imap.append(BOX1, _copy(refused_id), SENT)
    imap.append(BOX0, _copy(found_id), SENT)
    inventory = _inventory(tmp_path, _mailbox(tmp_path, BOX1, _imap(imap), password="wrong"),
                           _mailbox(tmp_path, BOX0, _imap(imap)))
    result = look(inventory, "unconfirmed", "--look", "--format", "json")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    looked = _found(result)
    assert looked[found] == {"result": "found", "mailbox": BOX0, "folder": SENT, "why": None}
    assert looked[refused] is not None and looked[refused]["result"] == "failed"
    assert f"IMAP login as {BOX1} refused" in str(looked[refused]["why"])
    table = look(inventory, "unconfirmed", "--look")
    assert any(refused_id in line and "couldn't look: IMAP login" in line for line in table.stdout.splitlines())


def test_a_mailbox_without_imap_settings_is_not_looked_at(imap: Dovecot, look: Cli, ledger: Ledger,
                                                         tmp_path: Path) -> None:
    row, _mid = unconfirmed(ledger, "L1", BOX2)
    result = look(_inventory(tmp_path, _mailbox(tmp_path, BOX2, None)), "unconfirmed", "--look", "--format", "json")
    assert result.returncode == 0, result.stderr  # nothing failed: there was nothing to look with
    assert _found(result)[row] == {"result": "not_looked", "mailbox": BOX2, "folder": None,
                                   "why": f"no imap settings for {BOX2}; add imap: to it in sendhost_mailboxes"}


def test_a_silent_server_is_couldnt_look_within_the_time_limit(look: Cli, ledger: Ledger, tmp_path: Path,
                                                               silent_port: int) -> None:
    row, _mid = unconfirmed(ledger, "L1", BOX3)
    inventory = _inventory(tmp_path, _mailbox(tmp_path, BOX3, f"host: 127.0.0.1, port: {silent_port}, "
                                                              "security: tls", password="x"))
    started = time.monotonic()
    result = look(inventory, "unconfirmed", "--look", "--imap-timeout", "1", "--format", "json")
    assert time.monotonic() - started < 10
    assert result.returncode == 1, result.stderr
    looked = _found(result)[row]
    assert looked is not None and looked["result"] == "failed" and "timed out" in str(looked["why"])


def test_the_inventory_sent_folder_is_searched_when_named(imap: Dovecot, look: Cli, ledger: Ledger,
                                                          tmp_path: Path) -> None:
    named, named_id = unconfirmed(ledger, "L1", BOX0)
    imap.create(BOX0, "Copies")
    imap.append(BOX0, _copy(named_id), "Copies")
    inventory = _inventory(tmp_path, _mailbox(tmp_path, BOX0, _imap(imap, extra="sent_folder: Copies")))
    result = look(inventory, "unconfirmed", "--look", "--format", "json")
    assert result.returncode == 0, result.stderr
    assert _found(result)[named] == {"result": "found", "mailbox": BOX0, "folder": "Copies", "why": None}

    missing = _inventory(tmp_path, _mailbox(tmp_path, BOX0, _imap(imap, extra="sent_folder: Nowhere")))
    result = look(missing, "unconfirmed", "--look", "--format", "json")
    assert result.returncode == 1
    looked = _found(result)[named]
    assert looked is not None and looked["result"] == "failed"
    assert str(looked["why"]).startswith("cannot open folder 'Nowhere'")


def test_without_a_sent_attribute_a_usual_name_is_searched_and_none_is_couldnt_look(
        plain_imap: Dovecot, look: Cli, ledger: Ledger, tmp_path: Path) -> None:
    usual, usual_id = unconfirmed(ledger, "L1", BOX0)
    nameless, _mid = unconfirmed(ledger, "L2", BOX1, address="bob@rcpt.example")
    plain_imap.create(BOX0, "Sent Items")
    plain_imap.append(BOX0, _copy(usual_id), "Sent Items")
    inventory = _inventory(tmp_path, _mailbox(tmp_path, BOX0, _imap(plain_imap)),
                           _mailbox(tmp_path, BOX1, _imap(plain_imap)))
    result = look(inventory, "unconfirmed", "--look", "--format", "json")
    assert result.returncode == 1
    looked = _found(result)
    assert looked[usual] == {"result": "found", "mailbox": BOX0, "folder": "Sent Items", "why": None}
    assert looked[nameless] is not None and looked[nameless]["result"] == "failed"
    assert str(looked[nameless]["why"]).startswith("no Sent folder")


def test_resolve_from_sent_resolves_exactly_the_rows_found(imap: Dovecot, look: Cli, ledger: Ledger,
                                                           tmp_path: Path, database_url: str) -> None:
    copied, copied_id = unconfirmed(ledger, "L1", BOX0)
    lost, _lost_id = unconfirmed(ledger, "L2", BOX0, address="b@rcpt.example")
    refused, refused_id = unconfirmed(ledger, "L3", BOX1, address="c@rcpt.example")
    unlooked, _mid = unconfirmed(ledger, "L4", BOX2, address="d@rcpt.example")
    imap.append(BOX0, _copy(copied_id), SENT)
    imap.append(BOX1, _copy(refused_id), SENT)  # there, but the login is refused: it stays unresolved
    inventory = _inventory(tmp_path, _mailbox(tmp_path, BOX0, _imap(imap)),
                           _mailbox(tmp_path, BOX1, _imap(imap), password="wrong"), _mailbox(tmp_path, BOX2, None))
    result = look(inventory, "resolve", "--from-sent", "--note", "weekly check")
    assert result.returncode == 1, result.stderr  # a mailbox could not be searched
    assert "Traceback" not in result.stderr
    now = {int(cells[0]): cells[-1] for cells in _table(result.stdout)}
    assert now == {copied: "resolved as sent", lost: "left unconfirmed", refused: "left unconfirmed",
                   unlooked: "left unconfirmed"}
    assert "1 resolved as sent, 3 left unconfirmed" in result.stdout
    assert [_status(database_url, row) for row in (copied, lost, refused, unlooked)] == [
        "sent", "unconfirmed", "unconfirmed", "unconfirmed"]
    (note,) = [e["detail"] for e in ledger.events_of(copied) if e["kind"] == "resolved"]
    assert note == f"sent by a person: found in {BOX0} folder '{SENT}' by its Message-ID: weekly check"

    again = look(inventory, "resolve", "--from-sent", "--format", "json")
    rows = {row["id"]: row for row in json.loads(again.stdout)["rows"]}
    assert sorted(rows) == [lost, refused, unlooked] and not any(row["resolved"] for row in rows.values())
