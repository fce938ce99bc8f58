"""The campaign file: a name, a mailbox group, the merge fields it uses, its steps and its pacing (docs/campaigns.md).

Loaded with line numbers and validated as a whole before anything is applied: the first problem is a
CampaignError `file:line: key: problem` (exit 2).

Merge fields are declared: the file lists under `fields:` the lead columns its steps may use, so that a typo
(`{frist_name}`) is refused when the file is applied, not when the first lead is imported. `unsubscribe_url` is
built in (the one-click link, placed where the body names it) and is never a lead's column.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from sender.campaigns.durations import DurationError, parse_duration
from sender.campaigns.keys import CampaignError as CampaignError  # re-exported: the file's one error
from sender.campaigns.keys import Keys
from sender.campaigns.pacing import PACING_KEYS, Pacing, parse_pacing
from sender.campaigns.template import FIELD_NAME_RE, Template, TemplateError, parse
from sender.safe_text import header_problem, text_problem
from sendhost.yaml_lines import load_yaml_with_lines

NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}\Z")
TOP_KEYS = ("name", "group", "fields", "steps", "stop_on_domain_reply", "tracking", *PACING_KEYS)
TRACKING_KEYS = ("clicks", "opens", "domain")
# A host name of two labels or more (`t.example.com`): the campaign's own, never a shared tracking host.
DOMAIN_RE = re.compile(r"(?=.{4,253}\Z)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]\Z")
STEP_KEYS = ("delay", "subject", "body")
# The leads CSV's own columns: never merge fields.
ADDRESS = "address"  # the leads file's column of a person's address, the one name it has everywhere
OLD_ADDRESS = "email"  # its name in CRM exports and earlier releases: read as `address`
OWN_COLUMNS = (ADDRESS, "lead", "timezone")  # the leads file's own columns; every other one is a merge field
RESERVED_COLUMNS = (*OWN_COLUMNS, OLD_ADDRESS)
BUILTIN_FIELDS = ("unsubscribe_url",)
MAX_STEPS = 20
MAX_DELAY_S = 365 * 86_400
MAX_SUBJECT = 500
MAX_BODY = 100_000


@dataclass(frozen=True)
class Step:
    """Step `number` (from 1): sent `delay_s` after the previous step was sent; no subject: a reply in the thread."""

    number: int
    delay_s: int
    subject: Template | None
    body: Template
    line: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Tracking:
    """The campaign's `tracking:` (docs/tracking.md): click redirects and an open image on its own domain; all off
    by default."""

    clicks: bool = False
    opens: bool = False
    domain: str | None = None

    @property
    def on(self) -> bool:
        return self.clicks or self.opens


NO_TRACKING = Tracking()


@dataclass(frozen=True)
class CampaignSpec:
    name: str
    group: str
    fields: tuple[str, ...]
    steps: tuple[Step, ...]
    pacing: Pacing
    path: str = field(default="", compare=False)
    # a reply from another address at a lead's domain (never a free-mail one) ends the lead's sequence
    stop_on_domain_reply: bool = False
    tracking: Tracking = NO_TRACKING

    @property
    def required_fields(self) -> frozenset[str]:
        """Lead fields some step uses without a fallback: each lead must have them, not empty."""
        needed = frozenset[str]().union(*(_templates_required(s) for s in self.steps))
        return needed - frozenset(BUILTIN_FIELDS)

    @property
    def used_fields(self) -> frozenset[str]:
        """Lead fields some step uses, with or without a fallback."""
        used = frozenset[str]().union(*(t.names for s in self.steps for t in (s.subject, s.body) if t is not None))
        return used - frozenset(BUILTIN_FIELDS)


def _templates_required(step: Step) -> frozenset[str]:
    return step.body.required | (step.subject.required if step.subject else frozenset())


def load_applied(name: str, source: str) -> CampaignSpec:
    """Campaign `name` from its file as last applied (`sender_campaigns.source`), checked again; named after the
    campaign, not a path: the file it came from may have moved or changed since."""
    return load_campaign(Path(f"campaign {name} (as applied)"), text=source)


def load_campaign(path: Path, known_groups: Collection[str] | None = None, *, text: str | None = None) -> CampaignSpec:
    """The campaign in `path` (or `text`, as applied earlier), checked whole; `known_groups` (the inventory's
    mailbox groups) checks `group`."""
    data = load_yaml_with_lines(path, multiline_text=True, text=text,
                                missing_hint="pass the campaign file (see campaign.example.yml)")
    keys = Keys(path, data, "", 1)
    keys.only(TOP_KEYS)
    name = keys.text("name")
    if not NAME_RE.match(name):
        keys.fail("name", f"{name!r} is not a campaign name: lower-case letters, digits, - and _, starting with a "
                  "letter or digit, at most 63 characters (like q1-founders)")
    group = keys.text("group")
    if known_groups is not None and group not in known_groups:
        keys.fail("group", f"no mailbox is in group {group!r}; the inventory's mailbox groups are "
                  f"{', '.join(sorted(known_groups)) or 'none'}")
    declared = _fields(keys)
    steps = _steps(keys, declared)
    return CampaignSpec(name, group, declared, steps, parse_pacing(keys), str(path),
                        stop_on_domain_reply=keys.flag("stop_on_domain_reply", False), tracking=_tracking(keys))


def _tracking(keys: Keys) -> Tracking:
    node = keys.get("tracking", None)
    if node is None:
        return NO_TRACKING
    inner = keys.child("tracking", node, keys.line("tracking"))
    inner.only(TRACKING_KEYS)
    clicks, opens = inner.flag("clicks", False), inner.flag("opens", False)
    domain = inner.text("domain", None)
    if domain is not None:
        domain = domain.strip().lower().rstrip(".")
        if not DOMAIN_RE.match(domain):
            inner.fail("domain", f"{domain!r} is not a host name; write the tracking host of your own domain, like "
                       "t.example.com")
    if (clicks or opens) and domain is None:
        inner.fail(None, "tracking needs a domain of your own (domain: t.example.com, pointed at `sendhost sender "
                   "web`): shared tracking hosts sit on URI blocklists")
    return Tracking(clicks, opens, domain)


def _fields(keys: Keys) -> tuple[str, ...]:
    declared: list[str] = []
    for line, name in keys.items("fields", None):
        if not isinstance(name, str) or not FIELD_NAME_RE.match(name):
            keys.fail("fields", f"{name!r} is not a field name (letters, digits and _, as the CSV column is "
                      "headed)", line)
        if name in RESERVED_COLUMNS or name in BUILTIN_FIELDS:
            keys.fail("fields", f"{name!r} is not a merge field: {', '.join(RESERVED_COLUMNS)} are the leads "
                      f"file's own columns and {', '.join(BUILTIN_FIELDS)} is built in", line)
        if name in declared:
            keys.fail("fields", f"{name!r} is listed twice", line)
        declared.append(name)
    return tuple(declared)


def _steps(keys: Keys, declared: tuple[str, ...]) -> tuple[Step, ...]:
    items = keys.items("steps")
    if not items:
        keys.fail("steps", "no step; a campaign has at least one")
    if len(items) > MAX_STEPS:
        keys.fail("steps", f"{len(items)} steps; at most {MAX_STEPS}")
    return tuple(_step(keys.child(f"steps[{number}]", node, line), number, declared)
                 for number, (line, node) in enumerate(items, start=1))


def _step(keys: Keys, number: int, declared: tuple[str, ...]) -> Step:
    keys.only(STEP_KEYS)
    delay_s = _delay(keys, number)
    subject_text = keys.text("subject", None)
    if number == 1 and subject_text is None:
        keys.fail(None, "step 1 needs a subject: later steps without one reply in its thread")
    subject = None
    if subject_text is not None:
        if problem := header_problem(subject_text):
            keys.fail("subject", f"{problem}; a subject is one line")
        if not subject_text.strip() or len(subject_text) > MAX_SUBJECT:
            keys.fail("subject", f"a subject has 1 to {MAX_SUBJECT} characters; drop the key to reply in the thread")
        subject = _template(keys, "subject", subject_text, declared, builtins=())
    body_text = keys.text("body")
    if problem := text_problem(body_text):
        keys.fail("body", problem)
    if not body_text.strip() or len(body_text) > MAX_BODY:
        keys.fail("body", f"a body has 1 to {MAX_BODY} characters")
    body = _template(keys, "body", body_text, declared, builtins=BUILTIN_FIELDS)
    return Step(number, delay_s, subject, body, keys.line())


def _delay(keys: Keys, number: int) -> int:
    raw = keys.get("delay", "0s" if number == 1 else None)
    if raw is None:
        keys.fail("delay", "required key is missing: how long after step "
                  f"{number - 1} was sent, like 3d")
    try:
        delay_s = parse_duration(raw)
    except DurationError as exc:
        keys.fail("delay", str(exc))
    if number == 1 and delay_s:
        keys.fail("delay", "step 1 goes as soon as the window and caps allow once the lead is added; its delay is "
                  "0s (or no delay key)")
    if number > 1 and not 0 < delay_s <= MAX_DELAY_S:
        keys.fail("delay", f"a follow-up waits more than 0s and at most 365d after its predecessor, not {raw}")
    return delay_s


def _template(keys: Keys, key: str, text: str, declared: tuple[str, ...], builtins: tuple[str, ...]) -> Template:
    try:
        template = parse(text)
    except TemplateError as exc:
        keys.fail(key, str(exc))
    for name in sorted(template.names):
        if name not in declared and name not in builtins:
            hint = (f"the file declares {', '.join(declared)}" if declared else "the file declares no fields")
            where = "a subject cannot hold it" if name in BUILTIN_FIELDS else f"{hint}; add it under fields:"
            keys.fail(key, f"unknown merge field {{{name}}}: {where}")
    return template
