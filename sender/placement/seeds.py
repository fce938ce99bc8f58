"""Where a placement message landed in a seed: each of its folders searched (read-only) for the message's token.

The seed's folders are listed once per session: INBOX, the spam folder (the one the server marks \\Junk, RFC 6154,
else the provider's usual name) and every other selectable folder but those that hold copies of everything or
what we sent (\\All, \\Sent, \\Drafts, \\Flagged, \\Important). A message found is placed by its folder; Gmail's
category of an inbox message comes from `X-GM-LABELS` where the server offers it (X-GM-EXT-1). A session that could
not be opened or searched says so (`failed`); only a search the server answered can leave a message unfound.
"""

from __future__ import annotations

import email
import email.policy
import imaplib
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import Message

from sender.feedback.imap import ImapFailure, bound, first_line, logged_in, quote
from sender.feedback.sent_folder import _listed
from sendhost.model import SPAM_FOLDER_NAMES, Seed

SESSION_TIMEOUT_S = 30.0
SKIPPED_FOLDERS = {"\\all", "\\sent", "\\drafts", "\\flagged", "\\important", "\\noselect", "\\nonexistent"}
# Gmail's inbox tabs as labels (X-GM-LABELS); Primary carries none.
GMAIL_CATEGORIES = {"promotions": "promotions", "social": "social", "updates": "updates", "forums": "forums",
                    "category_promotions": "promotions", "category_social": "social", "category_updates": "updates",
                    "category_forums": "forums"}
_INTERNALDATE = re.compile(rb'INTERNALDATE "([^"]+)"')
_LABELS = re.compile(rb"X-GM-LABELS \(([^)]*)\)")


@dataclass(frozen=True)
class Found:
    """A message found in a seed: where (`placement` inbox | spam | category | other), when the seed got it, and
    its header (for the receiver's verdicts)."""

    placement: str
    folder: str
    arrived_at: datetime | None
    message: Message
    category: str | None = None


@dataclass(frozen=True)
class Looked:
    """One pass over a seed: what it found by token, or why it could not look (`failed`)."""

    found: dict[str, Found]
    failed: str | None = None


def look(seed: Seed, tokens: Sequence[str], *, env: Mapping[str, str] | None = None,
         timeout_s: float = SESSION_TIMEOUT_S) -> Looked:
    """Search every folder of `seed` for each of `tokens` in one session, within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    found: dict[str, Found] = {}
    account = seed.imap
    try:
        with logged_in(account, env, timeout_s) as imap:
            bound(imap, deadline)
            gmail = any(c.upper() == "X-GM-EXT-1" for c in imap.capabilities)
            for folder, kind in folders(imap, seed.provider):
                left = [t for t in tokens if t not in found]
                if not left:
                    break
                bound(imap, deadline)
                status, _detail = imap.select(quote(folder), readonly=True)  # EXAMINE: no flag changes
                if status != "OK":
                    continue  # a folder that went away between LIST and SELECT holds nothing of ours
                for token in left:
                    bound(imap, deadline)
                    hit = _search(imap, token)
                    if hit is not None:
                        found[token] = _fetched(imap, hit, folder, kind, gmail)
    except ImapFailure as exc:
        return Looked(found, exc.why)
    except TimeoutError:
        return Looked(found, f"no answer from {account.host}:{account.port} within {timeout_s:g}s")
    except (OSError, imaplib.IMAP4.error, ValueError) as exc:
        return Looked(found, f"IMAP session with {account.host}:{account.port} failed: {first_line(exc)}")
    return Looked(found)


def folders(imap: imaplib.IMAP4, provider: str) -> list[tuple[str, str]]:
    """(folder, kind) to search in order: INBOX (`inbox`), the spam folder (`spam`), then the others (`other`)."""
    status, data = imap.list('""', "*")
    if status != "OK":
        raise imaplib.IMAP4.error(f"LIST answered {status}")
    listed = list(_listed(data))
    spam = next((name for flags, name in listed if "\\junk" in flags), None)
    if spam is None:
        by_name = {name.lower(): name for _flags, name in listed}
        spam = next((by_name[n.lower()] for n in SPAM_FOLDER_NAMES.get(provider, SPAM_FOLDER_NAMES["other"])
                     if n.lower() in by_name), None)
    ordered = [("INBOX", "inbox")] + ([(spam, "spam")] if spam else [])
    ordered += [(name, "other") for flags, name in listed
                if name.upper() != "INBOX" and name != spam and not flags & SKIPPED_FOLDERS]
    return ordered


def _search(imap: imaplib.IMAP4, token: str) -> bytes | None:
    status, data = imap.uid("SEARCH", "BODY", quote(token))
    if status != "OK":
        raise imaplib.IMAP4.error(f"SEARCH answered {status}")
    uids = (data[0] or b"").split() if data else []
    return uids[-1] if uids else None


def _fetched(imap: imaplib.IMAP4, uid: bytes, folder: str, kind: str, gmail: bool) -> Found:
    items = "(INTERNALDATE X-GM-LABELS BODY.PEEK[HEADER])" if gmail else "(INTERNALDATE BODY.PEEK[HEADER])"
    status, data = imap.uid("FETCH", uid.decode(), items)
    if status != "OK":
        raise imaplib.IMAP4.error(f"FETCH answered {status}")
    line, header = b"", b""
    for item in data:
        if isinstance(item, tuple):
            line, header = item[0], item[1]
    message = email.message_from_bytes(header, policy=email.policy.compat32)
    arrived = _internaldate(line)
    category = _category(line) if gmail and kind == "inbox" else None
    return Found("category" if category else kind, folder, arrived, message, category)


def _internaldate(line: bytes) -> datetime | None:
    match = _INTERNALDATE.search(line)
    if not match:
        return None
    parsed = imaplib.Internaldate2tuple(b'INTERNALDATE "' + match.group(1) + b'"')
    return datetime.fromtimestamp(time.mktime(parsed), UTC) if parsed else None


def _category(line: bytes) -> str | None:
    match = _LABELS.search(line)
    if not match:
        return None
    labels = [label.strip('"').lstrip("\\").lower() for label in _split_labels(match.group(1).decode())]
    return next((GMAIL_CATEGORIES[label] for label in labels if label in GMAIL_CATEGORIES), None)


def _split_labels(text: str) -> Iterable[str]:
    return re.findall(r'"(?:[^"\\]|\\.)*"|\S+', text)
