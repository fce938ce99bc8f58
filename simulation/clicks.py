"""The recipients' clicks on the campaign's tracked links (docs/tracking.md): a person now and then, hours after the
message; and, for some recipients, their mail gateway, which walks every link of every message seconds after it
arrives, as a security scanner with its own User-Agent.

Each click is followed as the web service's `/c/<token>` follows it (`sender.feedback.clicks.follow`: the token
checked with the ledger's key, the row's own link, the verdict from the rule table, the click recorded); only the
HTTP transport is left out. Drawn from a generator of its own, so that the recipients' other reactions, and every
figure the summary had before clicks, stay what they were for a seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from sender.feedback.clicks import follow
from sender.ledger.events import Feedback
from sender.sending.tokens import verify_link_token
from simulation import events
from simulation.mail import Delivery
from simulation.model import Reactions

BROWSER = "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 " \
          "Safari/605.1.15"
SCANNER = "Mozilla/5.0 (compatible; Proofpoint URL Defense)"
SCANNER_AFTER_S = (1.0, 4.0)  # a gateway checks the links as the message arrives


@dataclass(frozen=True)
class Click:
    at: float
    url: str
    user_agent: str
    delivery: Delivery


class Clickers:
    """Who clicks which tracked link of a delivered message, and when."""

    def __init__(self, rng: random.Random, reactions: Reactions) -> None:
        self.rng = rng
        self.reactions = reactions
        self._received: dict[str, int] = {}
        self._scanned: dict[str, bool] = {}  # a recipient's domain has a gateway, or not: drawn once per address

    def receive(self, delivery: Delivery, now: float) -> list[Click]:
        """A message reached `delivery.rcpt`: the clicks on its tracked links it will get."""
        if not delivery.click_urls:
            return []
        rates = self.reactions
        nth = self._received[delivery.rcpt] = self._received.get(delivery.rcpt, 0) + 1
        if delivery.rcpt not in self._scanned:
            self._scanned[delivery.rcpt] = self.rng.random() < rates.scanned
        clicks = []
        if self._scanned[delivery.rcpt]:
            walk_at = now + self.rng.uniform(*SCANNER_AFTER_S)
            clicks += [Click(walk_at, url, SCANNER, delivery) for url in delivery.click_urls]
        if self.rng.random() < rates.at_step(rates.click, nth):
            clicks.append(Click(now + self.rng.expovariate(1 / rates.click_mean_s),
                                self.rng.choice(delivery.click_urls), BROWSER, delivery))
        return clicks


def take_click(feedback: Feedback, key: bytes, click: Click, now: float) -> events.Clicked:
    """Follow `click` as `GET /c/<token>` does."""
    token = click.url.rsplit("/c/", 1)[-1]
    followed = follow(feedback, verify_link_token(key, token), "GET", click.user_agent)
    return events.Clicked(now, click.delivery.rcpt, click.delivery.message_id,
                          None if followed is None else followed.row,
                          "unmatched" if followed is None else followed.verdict.value)
