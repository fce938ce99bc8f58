"""The links of a step's body, found and rewritten the same way by the agent (compose) and the web service (the
redirect), so that a click token's index names the same link in both (docs/tracking.md).

A link is an http or https URL in the text, ending before whitespace, a quote, an angle bracket or a brace; the
punctuation that ends a sentence (`.`, `,`, `;`, `:`, `!`, `?`, and a `)` the URL did not open) is not part of
it. The unsubscribe link is never a tracked link: the body is read with `{unsubscribe_url}` still in place (a
brace ends a link), and that link stays the one-click one (RFC 8058).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from sender.campaigns.template import Template, render

UNSUBSCRIBE_MARK = "{unsubscribe_url}"  # what the body holds where the one-click link goes, until the very end
MAX_TRACKED = 100  # links past the 100th are left as written: no real message has more
_LINK_RE = re.compile(r"https?://[^\s<>\"'{}|\\^`\[\]]+", re.IGNORECASE)
_SENTENCE_END = ".,;:!?"


def _spans(text: str) -> list[tuple[int, int]]:
    spans = []
    for found in _LINK_RE.finditer(text):
        start, end = found.span()
        while end > start:
            last = text[end - 1]
            if last in _SENTENCE_END or (last == ")" and text.count("(", start, end) < text.count(")", start, end)):
                end -= 1
            else:
                break
        if end - start > len("https://"):
            spans.append((start, end))
    return spans[:MAX_TRACKED]


def links_of(text: str) -> list[str]:
    """The tracked links of `text`, in order: link i is the one a click token of index i names."""
    return [text[start:end] for start, end in _spans(text)]


def rewrite(text: str, url_of: Callable[[int], str]) -> str:
    """`text` with link i replaced by `url_of(i)`; everything else as written."""
    out, at = [], 0
    for index, (start, end) in enumerate(_spans(text)):
        out += [text[at:start], url_of(index)]
        at = end
    out.append(text[at:])
    return "".join(out)


def body_with_mark(body: Template | str, fields: Mapping[str, str]) -> str:
    """A campaign row's body rendered for its lead, with the unsubscribe link's place still marked."""
    return render(body, {**fields, "unsubscribe_url": UNSUBSCRIBE_MARK})


def click_url(domain: str, token: str) -> str:
    return f"https://{domain}/c/{token}"


def open_url(domain: str, token: str) -> str:
    return f"https://{domain}/o/{token}"
