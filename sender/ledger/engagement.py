"""A row's tracked links as `lead show` gives them: each original link, its tracked form, its clicks by verdict
(docs/tracking.md)."""

from __future__ import annotations

from dataclasses import dataclass

from sender.campaigns.template import TemplateError
from sender.ledger.store import Ledger
from sender.sending.links import body_with_mark, click_url, links_of

# The token is left out: it is a handle anyone holding it can click with as the recipient, not something to paste
# into a ticket.
ELIDED = "…"


@dataclass(frozen=True)
class TrackedLink:
    number: int  # from 1, as the row's history names it (`link 2 human`)
    original: str
    tracked: str  # https://<domain>/c/… : the token elided
    clicks: dict[str, int]  # verdict -> clicks

    def as_json(self) -> dict[str, object]:
        return {"link": self.number, "original": self.original, "tracked": self.tracked, "clicks": self.clicks}


def tracked_links(ledger: Ledger, email_id: int, domain: str) -> list[TrackedLink]:
    """The links of row `email_id` as its message carried them on `domain`; [] for a row without a lead's fields
    or whose body no longer renders."""
    row = ledger.fetch_one("row_text", {"id": email_id}, f"links of row {email_id}")
    if row is None:
        return []
    body, fields = row
    try:
        links = links_of(body_with_mark(str(body), {str(k): str(v) for k, v in fields.items()}))
    except TemplateError:
        return []
    clicks: dict[int, dict[str, int]] = {}
    for link, verdict, count in ledger.fetch_all("row_clicks", {"id": email_id}, f"clicks of row {email_id}"):
        clicks.setdefault(int(link), {})[str(verdict)] = int(count)
    return [TrackedLink(index + 1, link, click_url(domain, ELIDED), clicks.get(index, {}))
            for index, link in enumerate(links)]
