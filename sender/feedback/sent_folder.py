"""Was an unconfirmed row's message sent after all? Look for its Message-ID in its mailbox's Sent folder.

A provider that keeps a copy of every message it accepted by submission (Gmail, Microsoft 365) answers the question
the agent could not: the copy is there, or it is not. The folder is opened with EXAMINE (read-only: no flag, not
even \\Recent, changes) and searched by `HEADER Message-ID`; one session per mailbox, every row of it looked up in
that session, the whole within a time limit. A lookup that could not be made is reported as such, with why, and
never as "not found": only a search the server answered says a message is not there.
"""

from __future__ import annotations

import imaplib
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from sender.feedback.imap import ImapFailure, bound, first_line, logged_in, quote
from sender.ledger.store import Unconfirmed
from sendhost.model import ImapSettings, Mailbox

# Tried in this order when no folder carries the \Sent attribute and the inventory names none.
KNOWN_SENT_NAMES = ("Sent", "Sent Items", "Sent Messages", "Sent Mail", "[Gmail]/Sent Mail", "INBOX.Sent",
                    "INBOX/Sent")
DEFAULT_TIMEOUT_S = 30.0
_LIST_RE = re.compile(r'^\((?P<flags>[^)]*)\) (?:NIL|"(?:[^"\\]|\\.)*") (?P<name>.*)$', re.IGNORECASE)


class Seen(StrEnum):
    """What looking for one row's message in its Sent folder found."""

    FOUND = "found"
    NOT_FOUND = "not_found"  # the server searched the folder and has no message with the row's Message-ID
    NOT_LOOKED = "not_looked"  # nothing to look with: no IMAP settings for the mailbox, no Message-ID on the row
    FAILED = "failed"  # tried and could not: the server, the login, the folder, the time limit


@dataclass(frozen=True)
class Look:
    seen: Seen
    mailbox: str | None
    folder: str | None = None  # the folder searched (or that could not be opened)
    why: str | None = None  # for NOT_LOOKED and FAILED: what stood in the way, in a line for a person

    def as_dict(self) -> dict[str, str | None]:
        return {"result": self.seen.value, "mailbox": self.mailbox, "folder": self.folder, "why": self.why}


def look_all(rows: Iterable[Unconfirmed], mailboxes: Sequence[Mailbox], *, env: Mapping[str, str] | None = None,
             timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[int, Look]:
    """Each row's Look, by row id: one IMAP session per mailbox, each within `timeout_s`."""
    by_address = {m.address.lower(): m for m in mailboxes}
    looks: dict[int, Look] = {}
    pending: dict[str, list[Unconfirmed]] = {}
    for row in rows:
        if row.mailbox is None:
            looks[row.id] = Look(Seen.NOT_LOOKED, None, why="the row names no mailbox: its attempt never said "
                                                            "which one it used")
        elif row.message_id is None:
            looks[row.id] = Look(Seen.NOT_LOOKED, row.mailbox, why="the row has no Message-ID to search for")
        else:
            pending.setdefault(row.mailbox.lower(), []).append(row)
    for address, sought in pending.items():
        mailbox = by_address.get(address)
        if mailbox is None or mailbox.imap is None:
            why = (f"{address} is not in the inventory's sendhost_mailboxes" if mailbox is None else
                   f"no imap settings for {address}; add imap: to it in sendhost_mailboxes")
            looks.update({row.id: Look(Seen.NOT_LOOKED, address, why=why) for row in sought})
            continue
        found = look_in(mailbox.imap, [row.message_id for row in sought if row.message_id], env=env,
                        timeout_s=timeout_s)
        looks.update({row.id: _of(found[row.message_id], address) for row in sought if row.message_id})
    return looks


def look_in(account: ImapSettings, message_ids: Sequence[str], *, env: Mapping[str, str] | None = None,
            timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[str, Look]:
    """Search one mailbox's Sent folder for each Message-ID, in one session: a Look for each (mailbox unset)."""
    deadline = time.monotonic() + timeout_s
    looks: dict[str, Look] = {}
    folder: str | None = account.sent_folder
    try:
        with logged_in(account, env, timeout_s) as imap:
            bound(imap, deadline)
            folder = folder or sent_folder_of(imap)
            if folder is None:
                why = ("no Sent folder: none is marked \\Sent and none has a usual name (" +
                       ", ".join(KNOWN_SENT_NAMES) + "); name it with imap sent_folder in the inventory")
                return {m: Look(Seen.FAILED, None, why=why) for m in message_ids}
            bound(imap, deadline)
            status, detail = imap.select(quote(folder), readonly=True)  # EXAMINE
            if status != "OK":
                why = f"cannot open folder {folder!r}: {_text(detail)}; check imap sent_folder in the inventory"
                return {m: Look(Seen.FAILED, None, folder, why) for m in message_ids}
            for message_id in message_ids:
                bound(imap, deadline)
                status, found = imap.search(None, "HEADER", "Message-ID", quote(message_id))
                if status != "OK":
                    raise imaplib.IMAP4.error(f"SEARCH answered {status}: {_text(found)}")
                numbers = (found[0] if found else None) or b""
                looks[message_id] = Look(Seen.FOUND if numbers.split() else Seen.NOT_FOUND, None, folder)
    except ImapFailure as exc:
        return {m: Look(Seen.FAILED, None, None, exc.why) for m in message_ids}
    except TimeoutError:
        why = f"no answer from {account.host}:{account.port} within {timeout_s:g}s"
        return {m: looks.get(m) or Look(Seen.FAILED, None, folder, why) for m in message_ids}
    except (OSError, imaplib.IMAP4.error, ValueError) as exc:
        why = f"IMAP session with {account.host}:{account.port} failed: {first_line(exc)}"
        return {m: looks.get(m) or Look(Seen.FAILED, None, folder, why) for m in message_ids}
    return looks


def sent_folder_of(imap: imaplib.IMAP4) -> str | None:
    """The folder the server marks \\Sent (RFC 6154, in its LIST answer), else the first with a usual name."""
    status, data = imap.list('""', "*")
    if status != "OK":
        raise imaplib.IMAP4.error(f"LIST answered {status}: {_text(data)}")
    listed = list(_listed(data))
    for flags, name in listed:
        if "\\sent" in flags:
            return name
    by_name = {name.lower(): name for _flags, name in listed}
    return next((by_name[known.lower()] for known in KNOWN_SENT_NAMES if known.lower() in by_name), None)


def _listed(data: Sequence[object]) -> Iterable[tuple[set[str], str]]:
    """(its attributes, lower case; its name) of each folder in a LIST answer; a name sent as a literal arrives
    as a (line, name) pair."""
    for item in data:
        if isinstance(item, tuple):
            line, name = item[0].decode("utf-8", "replace"), item[1].decode("utf-8", "replace")
            match = _LIST_RE.match(line)
        elif isinstance(item, bytes):
            match = _LIST_RE.match(item.decode("utf-8", "replace"))
            name = match["name"] if match else ""
            if name.startswith('"') and name.endswith('"') and len(name) >= 2:
                name = re.sub(r'\\(.)', r"\1", name[1:-1])
        else:
            continue
        if match:
            yield {flag.lower() for flag in match["flags"].split()}, name


def _of(look: Look, mailbox: str) -> Look:
    return Look(look.seen, mailbox, look.folder, look.why)


def _text(data: object) -> str:
    first = data[0] if isinstance(data, list) and data else data
    if isinstance(first, bytes):
        first = first.decode("utf-8", "replace")
    return str(first or "no detail").strip()
