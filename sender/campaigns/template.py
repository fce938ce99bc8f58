"""Merge-field templates: `{first_name}`, `{first_name|there}` (a fallback), `{{` and `}}` for literal braces.

A small grammar of our own, parsed once, rendered by substitution: nothing here calls `str.format`, so a format
spec, an index or an attribute (`{0.__class__}`, `{name!r}`, `{name:>99999}`) is refused at parse time, never
evaluated. A field name is an identifier: a letter or `_`, then letters, digits and `_`.

A value that is empty (or only whitespace) counts as missing: `{first_name|there}` then renders `there`, and
`{first_name}` without a fallback is an error naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from sender.errors import SenderConfigError

FIELD_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
MAX_FIELD_NAME = 64


class TemplateError(SenderConfigError):
    """A template that does not parse, or a lead that cannot fill it. Exit 2."""


@dataclass(frozen=True)
class Field:
    """One `{name}` or `{name|fallback}` in a template."""

    name: str
    fallback: str | None


@dataclass(frozen=True)
class Template:
    """A parsed template: literal text and fields, in order. Compare templates by their `text`."""

    text: str
    parts: tuple[str | Field, ...]

    @property
    def required(self) -> frozenset[str]:
        """Fields used at least once without a fallback: a lead must have them."""
        return frozenset(p.name for p in self.parts if isinstance(p, Field) and p.fallback is None)

    @property
    def optional(self) -> frozenset[str]:
        """Fields only ever used with a fallback."""
        names = frozenset(p.name for p in self.parts if isinstance(p, Field))
        return names - self.required

    @property
    def names(self) -> frozenset[str]:
        return self.required | self.optional


def parse(text: str) -> Template:
    """`text` parsed, or TemplateError naming the character where it goes wrong and what to write instead."""
    parts: list[str | Field] = []
    literal: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char in "{}" and text.startswith(char * 2, index):
            literal.append(char)
            index += 2
            continue
        if char == "}":
            raise TemplateError(f"a lone '}}' at character {index + 1}; write '}}}}' for a literal brace")
        if char != "{":
            literal.append(char)
            index += 1
            continue
        end = text.find("}", index + 1)
        if end < 0:
            raise TemplateError(f"the '{{' at character {index + 1} is never closed; close the field with '}}', or "
                                "write '{{' for a literal brace")
        parts.extend(["".join(literal)] if literal else [])
        literal = []
        parts.append(_field(text[index + 1:end], index))
        index = end + 1
    if literal:
        parts.append("".join(literal))
    return Template(text, tuple(parts))


def _field(inside: str, index: int) -> Field:
    name, bar, fallback = inside.partition("|")
    where = f"the field {{{inside}}} at character {index + 1}"
    if "{" in inside:
        raise TemplateError(f"{where} holds a '{{'; fields do not nest (write '{{{{' for a literal brace)")
    if not FIELD_NAME_RE.match(name) or len(name) > MAX_FIELD_NAME:
        raise TemplateError(f"{where}: {name!r} is not a field name (letters, digits and _, not starting with a "
                            "digit; no formats, indexes or attributes); write '{{' for a literal brace")
    return Field(name, fallback if bar else None)


def fields(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """The fields of template `text`: (needed without a fallback, only ever with a fallback)."""
    template = parse(text)
    return template.required, template.optional


def render(template: Template | str, values: Mapping[str, str]) -> str:
    """`template` with each field replaced by its value (or fallback); TemplateError naming a field it cannot fill."""
    parsed = template if isinstance(template, Template) else parse(template)
    out: list[str] = []
    for part in parsed.parts:
        if isinstance(part, str):
            out.append(part)
            continue
        value = values.get(part.name)
        if value is not None and value.strip():
            out.append(value)
        elif part.fallback is not None:
            out.append(part.fallback)
        elif value is None:
            raise TemplateError(f"{{{part.name}}}: the lead has no field {part.name!r}")
        else:
            raise TemplateError(f"{{{part.name}}}: the lead's {part.name!r} is empty and the field has no fallback; "
                                f"fill it or write {{{part.name}|...}}")
    return "".join(out)
