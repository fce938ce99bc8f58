"""The links of a body, found and rewritten as the agent and the web service both read them (sender.sending.links)."""

from __future__ import annotations

import pytest

from sender.sending.links import UNSUBSCRIBE_MARK, body_with_mark, links_of, rewrite


@pytest.mark.parametrize(("text", "links"), [
    ("See https://a.example/x.", ["https://a.example/x"]),
    ("(see https://a.example/x) or https://a.example/wiki/Foo_(bar), ok?",
     ["https://a.example/x", "https://a.example/wiki/Foo_(bar)"]),
    ("<https://a.example/?q=1&r=2> and \"http://b.example/p\"", ["https://a.example/?q=1&r=2", "http://b.example/p"]),
    ("no link: https:// nor ftp://a.example/f nor example.com", []),
    (f"bye {UNSUBSCRIBE_MARK} and https://a.example/{UNSUBSCRIBE_MARK}", ["https://a.example/"]),
])
def test_links_end_where_a_sentence_or_a_bracket_does(text: str, links: list[str]) -> None:
    assert links_of(text) == links


def test_rewrite_replaces_each_link_by_its_index_and_keeps_the_rest() -> None:
    text = "A https://a.example/1, B https://a.example/2.\nC https://a.example/1"
    assert rewrite(text, lambda i: f"<{i}>") == "A <0>, B <1>.\nC <2>"


def test_the_unsubscribe_link_is_never_a_tracked_one() -> None:
    body = body_with_mark("Hi {name}, https://a.example/p. Bye: {unsubscribe_url}", {"name": "Ann"})
    assert links_of(body) == ["https://a.example/p"] and body.endswith(UNSUBSCRIBE_MARK)


def test_a_leads_field_can_hold_a_link_and_then_it_is_one() -> None:
    assert links_of(body_with_mark("Your page: {site}", {"site": "https://ann.example/"})) == ["https://ann.example/"]
