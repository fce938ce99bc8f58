"""Reading an enqueue CSV (`lead,step,address,group,subject,text[,not_before]`): every row checked before any is
written.

`to`, the address column's name before version 22 of the ledger, is read as `address`."""

from __future__ import annotations

import csv
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sender.addresses import AddressError, canonical
from sender.csv_input import CSV_OPEN_ERRORS, csv_open_error
from sender.errors import SenderConfigError
from sender.safe_text import header_problem

REQUIRED = ("lead", "step", "address", "group", "subject", "text")
OLD_NAMES = {"to": "address"}  # earlier releases' names of a column
OPTIONAL = ("not_before",)


@dataclass(frozen=True)
class Row:
    lead: str
    step: int
    address: str
    group: str
    subject: str
    text: str
    not_before: datetime | None
    line: int = 0  # where the row starts in its file

    def params(self) -> dict[str, object]:
        return {"lead": self.lead, "step": self.step, "address": self.address, "group": self.group,
                "subject": self.subject, "text": self.text, "not_before": self.not_before}


def read_rows(path: Path, known_groups: Collection[str] | None = None) -> list[Row]:
    """All rows of `path`, or SenderConfigError naming file:line, the column and the fix (nothing is written)."""
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            header = [OLD_NAMES.get(name, name) for name in reader.fieldnames or []]
            if twice := next((name for name in header if header.count(name) > 1), None):
                raise SenderConfigError(f"{path}:1: column {twice} appears twice (to is its old name when it is "
                                        "address); keep one")
            reader.fieldnames = header
            missing = [c for c in REQUIRED if c not in header]
            if missing:
                raise SenderConfigError(f"{path}:1: missing column(s) {', '.join(missing)}; the header must be "
                                        f"{','.join(REQUIRED)}[,not_before]")
            unknown = [c for c in header if c not in REQUIRED + OPTIONAL]
            if unknown:
                raise SenderConfigError(f"{path}:1: unknown column(s) {', '.join(unknown)}; allowed: "
                                        f"{','.join(REQUIRED + OPTIONAL)}")
            rows, start = [], reader.line_num + 1
            for raw in reader:  # a quoted field may span lines: name the line the row starts on
                rows.append(_row(path, start, raw, known_groups))
                start = reader.line_num + 1
            return rows
    except CSV_OPEN_ERRORS as exc:
        raise csv_open_error(path, "the CSV to enqueue", exc) from None


def _row(path: Path, line: int, raw: dict[str | None, str | None], known_groups: Collection[str] | None) -> Row:
    def fail(column: str, problem: str) -> SenderConfigError:
        return SenderConfigError(f"{path}:{line}: {column}: {problem}")

    if None in raw:
        raise fail("row", f"{len(raw) - 1 + len(raw[None] or [])} fields for {len(raw) - 1} columns; quote text "
                   "that contains commas")
    values = {k: (v or "") for k, v in raw.items() if k is not None}
    for column in REQUIRED:
        if column != "text" and not values[column].strip():
            raise fail(column, "empty; every row needs lead, step, address, group and subject")
    try:
        step = int(values["step"])
    except ValueError:
        raise fail("step", f"{values['step']!r} is not a whole number like 1") from None
    if step < 1:
        raise fail("step", f"{step} must be 1 or more")
    try:
        address = canonical(values["address"])  # the one form of an address: the suppression key, the row's
    except AddressError as exc:
        raise fail("address", str(exc)) from None
    group = values["group"].strip()
    if known_groups is not None and group not in known_groups:
        raise fail("group", f"unknown group {group!r}; the inventory's mailbox groups are "
                   f"{', '.join(sorted(known_groups)) or 'none'}")
    # Checked here, as the campaign files are: a CR/LF subject failed only after the attempt started (unconfirmed),
    # and PostgreSQL refuses a NUL with no line to name.
    if problem := header_problem(values["subject"]):
        raise fail("subject", f"{problem}; a subject is one line of printable text")
    if "\x00" in values["text"]:
        raise fail("text", f"holds a NUL at character {values['text'].index(chr(0)) + 1}; remove it")
    not_before = None
    if values.get("not_before", "").strip():
        try:
            not_before = datetime.fromisoformat(values["not_before"].strip())
        except ValueError:
            raise fail("not_before", f"{values['not_before']!r} is not a time like 2026-12-01T09:00:00+00:00") from None
        if not_before.tzinfo is None:
            not_before = not_before.replace(tzinfo=UTC)
    return Row(values["lead"].strip(), step, address, group, values["subject"], values["text"], not_before, line)
