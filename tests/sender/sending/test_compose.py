"""What a claimed row becomes (sender.sending.compose): its Subject, thread headers and body, with no service."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping

import pytest

from sender.campaigns.spec import Tracking
from sender.campaigns.template import TemplateError
from sender.ledger.store import Claimed
from sender.sending.compose import compose
from sender.sending.thread_headers import ThreadHeaders
from sender.sending.tokens import verify_link_token, verify_open_token, verify_token

LINK = "https://u.example/unsubscribe/abc"
FIRST, SECOND = "<one@sender.example>", "<two@sender.example>"


def row(subject: str, body: str, *, fields: Mapping[str, str] | None = None, own_subject: bool = True,
        earlier: tuple[tuple[str | None, str], ...] = ()) -> Claimed:
    return Claimed(1, "lead-1", len(earlier) + 1, "to@lead.example", "default", subject, body, 0, uuid.uuid4(), None,
                   None, own_subject=own_subject, fields=fields, earlier=earlier)


def test_an_enqueued_row_is_its_own_text_untouched() -> None:
    content = compose(row("Hi {name}", "Body {unsubscribe_url}"), LINK)
    assert content.headers == ThreadHeaders("Hi {name}") and content.body == "Body {unsubscribe_url}"


def test_a_campaign_step_is_rendered_with_the_leads_values_and_its_unsubscribe_link() -> None:
    content = compose(row("Hi {first_name|there}", "Hello {first_name|there} at {company}.\n{unsubscribe_url}",
                          fields={"first_name": "Ada", "company": "Acme"}), LINK)
    assert content.headers.items() == [("Subject", "Hi Ada")]
    assert content.body == f"Hello Ada at Acme.\n{LINK}"


def test_an_empty_value_takes_the_fields_default() -> None:
    content = compose(row("Hi {first_name|there}", "x", fields={"first_name": ""}), LINK)
    assert content.headers.subject == "Hi there"


def test_a_field_the_lead_cannot_fill_is_a_template_error() -> None:
    with pytest.raises(TemplateError):
        compose(row("Hi", "At {company}", fields={}), LINK)


def test_a_follow_up_replies_in_the_thread_of_the_earlier_steps() -> None:
    content = compose(row("", "Following up, {first_name|there}", fields={"first_name": "Ada"}, own_subject=False,
                          earlier=(("Quick question", FIRST), (None, SECOND))), LINK)
    assert content.headers.items() == [("Subject", "Re: Quick question"), ("In-Reply-To", SECOND),
                                       ("References", f"{FIRST} {SECOND}")]
    assert content.body == "Following up, Ada"


def test_a_step_with_its_own_subject_starts_a_new_thread() -> None:
    content = compose(row("New topic", "x", fields={}, earlier=(("Quick question", FIRST),)), LINK)
    assert content.headers.items() == [("Subject", "New topic")]


def test_a_follow_up_with_no_earlier_step_is_refused() -> None:
    with pytest.raises(ValueError, match="needs an earlier step"):
        compose(row("", "x", fields={}, own_subject=False), LINK)


@pytest.mark.parametrize("subject", ["Hi\r\nBcc: x@evil.example", "=?utf-8?b?SGk=?="])
def test_a_subject_that_cannot_be_a_header_is_refused_before_a_mailbox_is_reserved(subject: str) -> None:
    with pytest.raises(ValueError, match=r"^the subject "):
        compose(row(subject, "x"), LINK)
    with pytest.raises(ValueError, match=r"^the subject "):
        compose(row("{name}", "x", fields={"name": subject}), LINK)


TRACKED = Tracking(clicks=True, domain="t.example")
KEY = b"k" * 32


def test_with_clicks_on_each_link_becomes_a_token_of_its_row_and_index_and_unsubscribe_stays() -> None:
    claimed = row("Hi", "Prices: https://a.example/p. Story: https://a.example/s\n{unsubscribe_url}",
                  fields={"first_name": "Ada"})
    content = compose(claimed, LINK, TRACKED, KEY)
    tokens = re.findall(r"https://t\.example/c/([\w-]+)", content.body)
    assert [verify_link_token(KEY, t) for t in tokens] == [(claimed.idempotency_key, 0),
                                                           (claimed.idempotency_key, 1)]
    assert "a.example" not in content.body and content.body.endswith(f"\n{LINK}") and content.open_image is None


def test_an_untracked_campaign_and_an_enqueued_row_carry_their_links_as_written() -> None:
    text = "Prices: https://a.example/p"
    assert compose(row("Hi", text, fields={}), LINK).body == text
    assert compose(row("Hi", text), LINK, TRACKED, KEY).body == text  # `enqueue`: no campaign file, no tracking


def test_with_opens_on_the_message_gets_its_rows_open_image() -> None:
    claimed = row("Hi", "Hello", fields={})
    content = compose(claimed, LINK, Tracking(opens=True, domain="t.example"), KEY)
    assert content.body == "Hello" and content.open_image is not None
    token = content.open_image.removeprefix("https://t.example/o/")
    assert verify_open_token(KEY, token) == claimed.idempotency_key
    assert verify_token(KEY, token) is None  # never an unsubscribe token
