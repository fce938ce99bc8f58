"""The headers that make a follow-up a reply in its sequence's thread: Subject `Re: …`, In-Reply-To, References.

A step without a subject of its own replies in the thread of the latest earlier step that had one (step 1 when no
other step has a subject): `Subject: Re: <that subject>`, `In-Reply-To` the previous step's Message-ID,
`References` the Message-IDs of that step and every step after it, oldest first (RFC 5322 3.6.4). A step with a
subject of its own starts a new thread and carries no reply headers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sender.safe_text import header_problem

_MESSAGE_ID_RE = re.compile(r"<[^<>\s@]+@[^<>\s@]+>\Z")
# A subject that already reads as a reply (`Re:`, `RE :`, `re:`) gets no second prefix.
_REPLY_PREFIX_RE = re.compile(r"re\s*:", re.IGNORECASE)


@dataclass(frozen=True)
class ThreadHeaders:
    subject: str
    in_reply_to: str | None = None
    references: tuple[str, ...] = ()

    def items(self) -> list[tuple[str, str]]:
        """(header, value) pairs to set on the message, the reply headers only when there are some."""
        pairs = [("Subject", self.subject)]
        if self.in_reply_to:
            pairs += [("In-Reply-To", self.in_reply_to), ("References", " ".join(self.references))]
        return pairs


@dataclass(frozen=True)
class EarlierStep:
    """A step of the same lead already sent: its own subject (None: it replied in the thread), its Message-ID."""

    subject: str | None
    message_id: str


def reply_subject(subject: str) -> str:
    """`Re: <subject>`, or `subject` itself when it already starts with `Re:` (never `Re: Re:`)."""
    subject = subject.strip()
    return subject if _REPLY_PREFIX_RE.match(subject) else f"Re: {subject}"


def thread_headers(first_subject: str, earlier_message_ids: Sequence[str]) -> ThreadHeaders:
    """The headers of a reply in the thread that `first_subject` began, after the messages `earlier_message_ids`
    (oldest first, the thread's first message first)."""
    if not earlier_message_ids:
        raise ValueError("a reply needs at least one earlier message in its thread")
    if problem := header_problem(first_subject):
        raise ValueError(f"the thread's subject {problem}")
    for message_id in earlier_message_ids:
        if not _MESSAGE_ID_RE.match(message_id):
            raise ValueError(f"{message_id!r} is not a Message-ID like <key@example.com>")
    ids = tuple(earlier_message_ids)
    return ThreadHeaders(reply_subject(first_subject), ids[-1], ids)


def step_headers(own_subject: str | None, earlier: Sequence[EarlierStep]) -> ThreadHeaders:
    """The Subject and reply headers of a step, given the lead's earlier steps, oldest first."""
    if own_subject is not None:
        return ThreadHeaders(own_subject)
    roots = [index for index, step in enumerate(earlier) if step.subject is not None]
    if not roots:
        raise ValueError("a step without a subject needs an earlier step with one (step 1 always has one)")
    root = roots[-1]
    thread_subject = earlier[root].subject
    assert thread_subject is not None
    return thread_headers(thread_subject, [step.message_id for step in earlier[root:]])
