"""Reading a campaign's leads CSV: `address`, optionally `lead` and `timezone`, every other column a merge field.

Every row is checked before any is returned, so an import either takes the whole file or nothing; a refusal names
`file:line: column: problem`. The rules, documented in docs/campaigns.md:

- columns are separated by commas, or, where the header line has no comma, by semicolons or tabs (how spreadsheets
  in many locales save "CSV");
- the header names `address` (`email`, the name CRM exports and earlier releases give it, is read as the same
  column); merge columns are field names (letters, digits, `_`), each once; the columns a step
  needs without a fallback must be there;
- `address` is reduced to the canonical address (sender.addresses) or refused; the same address twice in the file is
  one lead (the first row), the others counted as duplicates;
- `timezone` that is empty or not an IANA name falls back to the campaign's, counted in the report and the first
  few such lines named;
- every value is one line without control characters (it may reach a subject, a header or a terminal), with the
  spaces around it dropped; a value a step needs without a fallback must not be empty;
- bounded work: a physical line of at most 64 KiB, a value of at most 4,096 characters, at most 100 columns and
  250,000 rows a file (split a larger list into several files).
"""

from __future__ import annotations

import csv
import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from sender.addresses import AddressError, canonical
from sender.campaigns.pacing import valid_timezone
from sender.campaigns.spec import ADDRESS, BUILTIN_FIELDS, OLD_ADDRESS, OWN_COLUMNS, RESERVED_COLUMNS, CampaignSpec
from sender.campaigns.template import FIELD_NAME_RE
from sender.csv_input import CSV_OPEN_ERRORS, csv_open_error
from sender.errors import SenderConfigError
from sender.safe_text import header_problem

MAX_LINE = 64 * 1024
MAX_VALUE = 4096
MAX_COLUMNS = 100
MAX_ROWS = 250_000
MAX_LEAD_ID = 200
DUPLICATES_LISTED = 10
DEFAULTED_LISTED = 5  # of each kind: empty, not an IANA name


class LeadsError(SenderConfigError):
    """A leads file that cannot be imported as written. Exit 2."""


@dataclass(frozen=True)
class Lead:
    """One row: its line in the file, the canonical address, the caller's id, the time zone it sends in."""

    line: int
    address: str
    lead_id: str | None
    timezone: str
    fields: Mapping[str, str]


@dataclass(frozen=True)
class LeadsReport:
    rows: int
    duplicates: int
    timezone_absent: int
    timezone_invalid: int
    duplicate_lines: tuple[tuple[int, int], ...]  # (line, line of the row it repeats), the first few
    timezone_absent_lines: tuple[int, ...] = ()  # the first few lines whose time zone was empty
    timezone_invalid_lines: tuple[tuple[int, str], ...] = ()  # (line, the time zone as written), the first few

    @property
    def timezone_defaulted(self) -> int:
        """Leads that send in the campaign's time zone because their own was empty or invalid."""
        return self.timezone_absent + self.timezone_invalid


@dataclass(frozen=True)
class LeadsFile:
    leads: tuple[Lead, ...]
    report: LeadsReport


def read_leads(path: Path, spec: CampaignSpec, *, max_rows: int = MAX_ROWS, max_line: int = MAX_LINE) -> LeadsFile:
    """Every lead of `path` for campaign `spec`, or LeadsError naming file:line (nothing is returned half)."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            return _Reader(path, spec, max_rows).read(_bounded_lines(path, handle, max_line))
    except CSV_OPEN_ERRORS as exc:
        raise csv_open_error(path, "the leads CSV (see leads.example.csv)", exc, LeadsError) from None


_SEPARATOR_NAMES = {",": "commas", ";": "semicolons", "\t": "tabs"}


def separator(header_line: str) -> str:
    """The column separator a leads file uses, told by its header line: a comma, unless the header has none and
    has semicolons or tabs (spreadsheets in many locales save CSV with `;`)."""
    if "," in header_line:
        return ","
    return ";" if ";" in header_line else "\t" if "\t" in header_line else ","


def _bounded_lines(path: Path, handle: IO[str], max_line: int) -> Iterator[str]:
    # csv would read a line of any length whole; this reads at most max_line + 1 characters of one.
    number = 0
    while line := handle.readline(max_line + 1):
        number += 1
        if len(line) > max_line:
            raise LeadsError(f"{path}:{number}: a line longer than {max_line} characters; is this a CSV of leads?")
        yield line


class _Reader:
    def __init__(self, path: Path, spec: CampaignSpec, max_rows: int) -> None:
        self.path, self.spec, self.max_rows = path, spec, max_rows
        self.required = sorted(spec.required_fields)  # worked out from the templates once, not for every row
        self.zones: dict[str, bool] = {}  # each distinct time zone looked up once
        self.timezone_absent = self.timezone_invalid = 0
        self.timezone_absent_lines: list[int] = []
        self.timezone_invalid_lines: list[tuple[int, str]] = []
        self.delimiter = ","  # told by the header line (separator)

    def fail(self, line: int, column: str, problem: str) -> LeadsError:
        return LeadsError(f"{self.path}:{line}: {column}: {problem}")

    def read(self, lines: Iterator[str]) -> LeadsFile:
        first = next(lines, "")
        self.delimiter = separator(first)
        reader = csv.reader(itertools.chain((first,), lines), delimiter=self.delimiter)
        header = next(reader, None)
        if not header:
            raise self.fail(1, "header", "empty file; the first line names the columns, with at least address")
        columns = self._header(header)
        first_line: dict[str, int] = {}
        leads: list[Lead] = []
        duplicates: list[tuple[int, int]] = []
        rows = 0
        start = reader.line_num + 1
        for row in reader:
            # A quoted value may span lines: a row is named by the line it starts on.
            line, start = start, reader.line_num + 1
            if not row:
                continue
            rows += 1
            if rows > self.max_rows:
                raise self.fail(line, "row", f"more than {self.max_rows} rows; split the file and add each part")
            lead = self._lead(line, columns, row)
            if lead.address in first_line:
                duplicates.append((line, first_line[lead.address]))
                continue
            first_line[lead.address] = line
            leads.append(Lead(line, lead.address, lead.lead_id, self._timezone(line, lead.timezone), lead.fields))
        report = LeadsReport(rows, len(duplicates), self.timezone_absent, self.timezone_invalid,
                             tuple(duplicates[:DUPLICATES_LISTED]), tuple(self.timezone_absent_lines),
                             tuple(self.timezone_invalid_lines))
        return LeadsFile(tuple(leads), report)

    def _header(self, header: list[str]) -> list[str]:
        columns = [name.strip() for name in header]
        if len(columns) > MAX_COLUMNS:
            raise self.fail(1, "header", f"{len(columns)} columns; at most {MAX_COLUMNS}")
        for name in columns:
            if columns.count(name) > 1:
                raise self.fail(1, name or "header", "this column appears twice; keep one")
            if name in RESERVED_COLUMNS:
                continue
            if not FIELD_NAME_RE.match(name) or len(name) > 64:
                raise self.fail(1, name or "header", "not a merge field name (letters, digits and _, not starting "
                                "with a digit, like first_name); rename the column")
            if name in BUILTIN_FIELDS:
                raise self.fail(1, name, "built into every message; a lead cannot set it")
        if ADDRESS in columns and OLD_ADDRESS in columns:
            raise self.fail(1, OLD_ADDRESS, f"{OLD_ADDRESS} is the old name of the {ADDRESS} column; keep one")
        columns = [ADDRESS if name == OLD_ADDRESS else name for name in columns]
        if ADDRESS not in columns:
            raise self.fail(1, "header", f"no {ADDRESS} column (the columns are {', '.join(columns)}); name the "
                            f"column of the leads' addresses {ADDRESS}")
        if missing := [name for name in self.required if name not in columns]:
            name = missing[0]
            raise self.fail(1, "header", f"no {name} column, and {_needed_by(self.spec, name)} uses {{{name}}} "
                            f"without a fallback; add the column, or write {{{name}|...}} in the campaign")
        return columns

    def _lead(self, line: int, columns: list[str], row: list[str]) -> Lead:
        if len(row) != len(columns):
            raise self.fail(line, "row", f"{len(row)} values for {len(columns)} columns; quote values that "
                            f"contain {_SEPARATOR_NAMES[self.delimiter]}")
        values: dict[str, str] = {}
        for name, raw in zip(columns, row, strict=True):
            value = raw.strip(" \t")
            if problem := header_problem(value):
                raise self.fail(line, name, f"{problem}; a value is one line of text without control characters")
            if len(value) > MAX_VALUE:
                raise self.fail(line, name, f"{len(value)} characters; a value has at most {MAX_VALUE}")
            values[name] = value
        try:
            address = canonical(values[ADDRESS])
        except AddressError as exc:
            raise self.fail(line, ADDRESS, str(exc)) from None
        fields = {k: v for k, v in values.items() if k not in OWN_COLUMNS}
        for name in self.required:
            if not fields[name]:
                raise self.fail(line, name, f"empty, and {_needed_by(self.spec, name)} uses {{{name}}} without a "
                                f"fallback; fill it, or write {{{name}|...}} in the campaign")
        lead_id = values.get("lead") or None
        if lead_id is not None and len(lead_id) > MAX_LEAD_ID:
            raise self.fail(line, "lead", f"{len(lead_id)} characters; an id has at most {MAX_LEAD_ID}")
        return Lead(line, address, lead_id, values.get("timezone", ""), fields)  # the time zone as given, for now

    def _timezone(self, line: int, value: str) -> str:
        if not value:
            self.timezone_absent += 1
            if len(self.timezone_absent_lines) < DEFAULTED_LISTED:
                self.timezone_absent_lines.append(line)
            return self.spec.pacing.timezone
        if value not in self.zones:
            self.zones[value] = valid_timezone(value)
        if not self.zones[value]:
            self.timezone_invalid += 1
            if len(self.timezone_invalid_lines) < DEFAULTED_LISTED:
                self.timezone_invalid_lines.append((line, value))
            return self.spec.pacing.timezone
        return value


def _needed_by(spec: CampaignSpec, name: str) -> str:
    """The first step template that needs `name` without a fallback (`steps[2].body`)."""
    for step in spec.steps:
        for key, template in (("subject", step.subject), ("body", step.body)):
            if template is not None and name in template.required:
                return f"steps[{step.number}].{key}"
    return "a step"
