"""The rule tables of sender.feedback.engagement: who a click or an open is from, each rule on its own and in order."""

from __future__ import annotations

import pytest

from sender.feedback.engagement import (
    AT_DELIVERY_S,
    CLICK_RULES,
    OPEN_RULES,
    Hit,
    Verdict,
    classify_click,
    classify_open,
)

BROWSER = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 " \
          "Safari/605.1.15"
LATER = 3600.0  # an hour after the provider's acceptance


def click(method: str = "GET", agent: str = BROWSER, after: float | None = LATER, links: int = 3, link: int = 0,
          burst: frozenset[int] = frozenset()) -> Hit:
    return Hit(method, agent, after, links, link, burst)


@pytest.mark.parametrize(("hit", "rule"), [
    (click(), ""),
    (click(after=None), ""),  # no acceptance known: no timing rule applies
    (click(method="HEAD"), "head_request"),
    (click(method="head", agent="Mozilla/5.0 (compatible; Barracuda)"), "head_request"),  # the first rule wins
    (click(agent="Mozilla/5.0 (compatible; Barracuda Sentinel)"), "scanner_agent"),
    (click(agent="Microsoft Office Existence Discovery"), "scanner_agent"),
    (click(agent="Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm) BingPreview/1.0b"),
     "scanner_agent"),
    (click(agent="python-requests/2.32"), "scanner_agent"),
    (click(agent=""), "scanner_agent"),
    (click(after=AT_DELIVERY_S - 0.5), "at_delivery"),
    (click(after=AT_DELIVERY_S), ""),
    (click(link=2, burst=frozenset({0, 1})), "every_link_same_second"),
    (click(link=1, burst=frozenset({0})), ""),  # two of three links: a person may do that
    (click(links=1, link=0), ""),  # a message of one link: one click is what a person does
    (click(links=2, link=1, burst=frozenset({1})), ""),  # the same link twice is not every link
])
def test_each_click_rule_and_its_order(hit: Hit, rule: str) -> None:
    verdict, named = classify_click(hit)
    assert named == rule
    assert verdict is (Verdict.HUMAN if rule == "" else Verdict.SCANNER)


@pytest.mark.parametrize(("agent", "after", "expected"), [
    (BROWSER, LATER, (Verdict.HUMAN, "")),
    ("Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)", LATER,
     (Verdict.GOOGLE_PROXY, "google_proxy")),
    ("Mozilla/5.0", LATER, (Verdict.APPLE_PROXY, "apple_proxy")),
    ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko)", LATER,
     (Verdict.APPLE_PROXY, "apple_proxy")),
    ("Mozilla/5.0", 1.0, (Verdict.APPLE_PROXY, "apple_proxy")),  # a proxy's label before the timing's
    ("", LATER, (Verdict.SCANNER, "scanner_agent")),
    (BROWSER, 1.0, (Verdict.SCANNER, "at_delivery")),
])
def test_opens_from_apples_and_googles_proxies_are_labelled_as_such(agent: str, after: float,
                                                                     expected: tuple[Verdict, str]) -> None:
    assert classify_open(Hit("GET", agent, after)) == expected


def test_every_rule_says_why_and_names_are_unique() -> None:
    for rules in (CLICK_RULES, OPEN_RULES):
        assert len({r.name for r in rules}) == len(rules)
        assert all(r.why and r.verdict is not Verdict.HUMAN for r in rules)
