"""What a new version of a campaign file changes, for `campaign apply` on a campaign that already runs.

A change applies to steps not yet queued; this says which steps those are (added, removed, changed), whether the
pacing or the group changed, and which fields the new steps need that the old ones did not, so apply can check the
leads already imported before it takes the file.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import date

from sender.campaigns.durations import format_duration
from sender.campaigns.spec import CampaignSpec, Step


@dataclass(frozen=True)
class SpecChanges:
    """The difference between two versions of one campaign; `lines` says it for people, one change a line."""

    lines: tuple[str, ...]
    steps_added: tuple[int, ...]
    steps_removed: tuple[int, ...]
    steps_changed: tuple[int, ...]
    group_changed: bool
    pacing_changed: tuple[str, ...]
    newly_required_fields: frozenset[str]

    @property
    def empty(self) -> bool:
        return not self.lines


def changes(old: CampaignSpec, new: CampaignSpec) -> SpecChanges:
    """What applying `new` over `old` changes; ValueError for two different campaigns (names differ)."""
    if old.name != new.name:
        raise ValueError(f"{old.name!r} and {new.name!r} are two campaigns, not two versions of one")
    lines: list[str] = []
    if old.group != new.group:
        lines.append(f"group: {old.group} -> {new.group}")
    if old.fields != new.fields:
        lines.append(f"fields: {', '.join(old.fields) or '-'} -> {', '.join(new.fields) or '-'}")
    changed: list[int] = []
    for before, after in zip(old.steps, new.steps, strict=False):
        what = _step_changes(before, after)
        if what:
            changed.append(after.number)
            lines.extend(f"steps[{after.number}].{line}" for line in what)
    added = tuple(s.number for s in new.steps[len(old.steps):])
    removed = tuple(s.number for s in old.steps[len(new.steps):])
    lines.extend(f"steps[{n}]: added" for n in added)
    lines.extend(f"steps[{n}]: removed" for n in removed)
    pacing = tuple(f.name for f in fields(old.pacing) if getattr(old.pacing, f.name) != getattr(new.pacing, f.name))
    lines.extend(f"{name}: {_as_written(getattr(old.pacing, name))} -> {_as_written(getattr(new.pacing, name))}"
                 for name in pacing)
    return SpecChanges(tuple(lines), added, removed, tuple(changed), old.group != new.group, pacing,
                       new.required_fields - old.required_fields)


def _as_written(value: object) -> str:
    """A pacing value as a campaign file writes it, not as Python prints it (`2026-12-24`, never
    `datetime.date(2026, 12, 24)`); `-` for a key not given."""
    if value is None or value == ():
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, tuple):
        return ", ".join(item.isoformat() if isinstance(item, date) else str(item) for item in value)
    return str(value)


def _step_changes(before: Step, after: Step) -> list[str]:
    what = []
    if before.delay_s != after.delay_s:
        what.append(f"delay: {format_duration(before.delay_s)} -> {format_duration(after.delay_s)}")
    if before.subject != after.subject:
        old = before.subject.text if before.subject else "(reply in the thread)"
        new = after.subject.text if after.subject else "(reply in the thread)"
        what.append(f"subject: {old!r} -> {new!r}")
    if before.body != after.body:
        what.append("body: changed")
    return what
