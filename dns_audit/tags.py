"""The `tag=value; tag=value` list grammar shared by DKIM, DMARC, MTA-STS and TLS-RPT records. No I/O."""

from __future__ import annotations

import re

_TAG = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


class TagSyntaxError(ValueError):
    """A malformed tag list; the message names the bad part."""


def parse_tags(text: str) -> dict[str, str]:
    """Parse a tag list (RFC 6376 §3.2); duplicate tags and tags without `=` are errors."""
    tags: dict[str, str] = {}
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or not _TAG.match(name):
            raise TagSyntaxError(f"{part[:60]!r} is not `tag=value`")
        if name.lower() in tags:
            raise TagSyntaxError(f"tag {name!r} appears twice")
        tags[name.lower()] = value.strip()
    return tags
