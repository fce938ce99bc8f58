"""Who clicked a tracked link or loaded the open image: a person, or a machine acting for the mailbox
(docs/tracking.md).

One rule table per kind, read in order; the first rule that matches gives the verdict and its name, which the
ledger keeps with the click. No rule matching: `human`. Only human clicks count as clicks; an open is only ever an
estimate (Apple's Mail Privacy Protection loads every image of every message, whoever reads it).

    CLICK_RULES: head_request, scanner_agent, at_delivery, every_link_same_second
    OPEN_RULES:  google_proxy, apple_proxy, scanner_agent, at_delivery

The rules are heuristics of the field, each written down with why: a security gateway (Microsoft Defender's Safe
Links, Proofpoint, Mimecast, Barracuda...) fetches every link of a message as it arrives, often with a HEAD request
or its own user agent, and often every link at once; no person reads a message within seconds of its acceptance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

AT_DELIVERY_S = 10.0  # the provider's acceptance to a person's click: no one reads and clicks faster
BURST_S = 1.0  # "the same second": every link of the message clicked within this long

# Security gateways, link checkers and link-preview fetchers, matched case-insensitively as parts of the
# User-Agent. A person's browser or mail app never says these.
SCANNER_AGENTS = (
    "barracuda", "proofpoint", "mimecast", "safelinks", "bingpreview", "microsoft office existence discovery",
    "ms-office", "forcepoint", "sophos", "symantec", "trend micro", "trendmicro", "fireeye", "ironport", "cisco",
    "zscaler", "paloalto", "checkpoint", "avanan", "abnormal", "vade", "hornetsecurity", "cloudmark",
    "slackbot", "facebookexternalhit", "twitterbot", "linkedinbot", "whatsapp", "telegrambot", "discordbot",
    "googlebot", "bot/", "crawler", "spider", "headlesschrome", "phantomjs", "python-requests", "python-urllib",
    "aiohttp", "curl/", "wget/", "go-http-client", "java/", "okhttp", "libwww-perl", "httpclient", "scanner",
)
GOOGLE_PROXY_AGENT = "googleimageproxy"  # Gmail fetches every image through its proxy, once, when the mail is shown
# Apple's Mail Privacy Protection preloads images from Apple's relays with a bare agent, whoever reads the mail
APPLE_PROXY_AGENTS = frozenset({"mozilla/5.0", "mozilla/5.0 (macintosh; intel mac os x 10_15_7) applewebkit/605.1.15 "
                                "(khtml, like gecko)"})


class Verdict(StrEnum):
    """Who a click or an open is from, as the ledger keeps it (sender_engagement.verdict)."""

    HUMAN = "human"
    SCANNER = "scanner"  # a security gateway, link checker or preview fetcher: never counted
    APPLE_PROXY = "apple_proxy"  # an open through Apple's Mail Privacy Protection: not a person reading
    GOOGLE_PROXY = "google_proxy"  # an open through Gmail's image proxy: a person may be reading, may not


@dataclass(frozen=True)
class Hit:
    """One request for a tracked link or an open image, with what the rules read of it."""

    method: str  # GET or HEAD
    user_agent: str
    seconds_after_acceptance: float | None  # None: the row's acceptance is not known
    links_in_message: int = 0  # how many tracked links its message has (a click's)
    link: int | None = None  # the link this click is on (None: an open)
    # the row's links clicked within BURST_S before, by what looked like a person until now
    links_clicked_in_burst: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Rule:
    name: str
    verdict: Verdict
    why: str
    matches: Callable[[Hit], bool]


def _agent(hit: Hit) -> str:
    return hit.user_agent.strip().lower()


def _scanner_agent(hit: Hit) -> bool:
    agent = _agent(hit)
    return not agent or any(known in agent for known in SCANNER_AGENTS)


def _at_delivery(hit: Hit) -> bool:
    return hit.seconds_after_acceptance is not None and hit.seconds_after_acceptance < AT_DELIVERY_S


def _every_link(hit: Hit) -> bool:
    if hit.link is None or hit.links_in_message < 2:  # one link clicked is what a person does too
        return False
    return len(hit.links_clicked_in_burst | {hit.link}) >= hit.links_in_message


CLICK_RULES = (
    Rule("head_request", Verdict.SCANNER, "a HEAD request checks a link; a browser following one sends GET",
         lambda hit: hit.method.upper() == "HEAD"),
    Rule("scanner_agent", Verdict.SCANNER, "the User-Agent is a known security scanner or link-preview fetcher, or "
         "there is none", _scanner_agent),
    Rule("at_delivery", Verdict.SCANNER, f"within {AT_DELIVERY_S:g} s of the provider's acceptance: the recipient's "
         "gateway fetching links as the message arrives", _at_delivery),
    Rule("every_link_same_second", Verdict.SCANNER, f"every link of the message within {BURST_S:g} s: a machine "
         "walking the links (the earlier clicks of the burst are relabelled)", _every_link),
)

OPEN_RULES = (
    Rule("google_proxy", Verdict.GOOGLE_PROXY, "Gmail's image proxy loads the image when the mail is shown, or "
         "ahead of it", lambda hit: GOOGLE_PROXY_AGENT in _agent(hit)),
    Rule("apple_proxy", Verdict.APPLE_PROXY, "Apple's Mail Privacy Protection preloads every image with a bare "
         "User-Agent, read or not", lambda hit: _agent(hit) in APPLE_PROXY_AGENTS),
    Rule("scanner_agent", Verdict.SCANNER, "a known security scanner or fetcher, or no User-Agent",
         _scanner_agent),
    Rule("at_delivery", Verdict.SCANNER, f"within {AT_DELIVERY_S:g} s of the provider's acceptance", _at_delivery),
)


def classify(hit: Hit, rules: tuple[Rule, ...]) -> tuple[Verdict, str]:
    """(verdict, the name of the rule that gave it; '' for a person)."""
    for rule in rules:
        if rule.matches(hit):
            return rule.verdict, rule.name
    return Verdict.HUMAN, ""


def classify_click(hit: Hit) -> tuple[Verdict, str]:
    return classify(hit, CLICK_RULES)


def classify_open(hit: Hit) -> tuple[Verdict, str]:
    return classify(hit, OPEN_RULES)
