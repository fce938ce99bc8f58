"""Threading: a follow-up without its own subject is `Re:` step 1's subject, replying to the previous step."""

from __future__ import annotations

from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default

import pytest

from sender.sending.thread_headers import EarlierStep, ThreadHeaders, reply_subject, step_headers, thread_headers

ID1, ID2, ID3 = "<k1@example.com>", "<k2@example.com>", "<k3@example.com>"


def test_step_2_replies_to_step_1() -> None:
    assert thread_headers("Quick question, Eve", [ID1]) == ThreadHeaders("Re: Quick question, Eve", ID1, (ID1,))


def test_step_3_replies_to_step_2_and_references_both_oldest_first() -> None:
    assert thread_headers("Quick question", [ID1, ID2]) == ThreadHeaders("Re: Quick question", ID2, (ID1, ID2))


@pytest.mark.parametrize(("subject", "expected"), [
    ("Hello", "Re: Hello"), ("Re: Hello", "Re: Hello"), ("RE: Hello", "RE: Hello"), ("re : Hello", "re : Hello"),
    ("  Hello ", "Re: Hello"), ("Regarding Q1", "Re: Regarding Q1"),
])
def test_the_reply_subject_is_never_re_re(subject: str, expected: str) -> None:
    assert reply_subject(subject) == expected


def test_a_step_with_its_own_subject_starts_a_new_thread() -> None:
    assert step_headers("A new angle", [EarlierStep("Hello", ID1)]) == ThreadHeaders("A new angle", None, ())


def test_a_step_without_subject_replies_in_the_thread_of_the_latest_step_that_had_one() -> None:
    only_first = [EarlierStep("Hello", ID1), EarlierStep(None, ID2)]
    assert step_headers(None, only_first) == ThreadHeaders("Re: Hello", ID2, (ID1, ID2))
    restarted = [EarlierStep("Hello", ID1), EarlierStep("A new angle", ID2), EarlierStep(None, ID3)]
    assert step_headers(None, restarted) == ThreadHeaders("Re: A new angle", ID3, (ID2, ID3))


def test_a_reply_needs_an_earlier_message_with_a_subject() -> None:
    with pytest.raises(ValueError, match="at least one earlier message"):
        thread_headers("Hello", [])
    with pytest.raises(ValueError, match="needs an earlier step with one"):
        step_headers(None, [])


@pytest.mark.parametrize("message_id", ["k1@example.com", "<k1@example.com>\r\nBcc: x@y", "<k 1@example.com>", ""])
def test_what_is_not_a_message_id_is_refused(message_id: str) -> None:
    with pytest.raises(ValueError, match="is not a Message-ID"):
        thread_headers("Hello", [ID1, message_id])


def test_a_subject_that_would_break_the_header_is_refused() -> None:
    with pytest.raises(ValueError, match="line feed"):
        thread_headers("Hello\nBcc: all@rcpt.example", [ID1])


def test_the_headers_survive_a_real_message_round_trip() -> None:
    message = EmailMessage()
    for name, value in thread_headers("Quick question", [ID1, ID2]).items():
        message[name] = value
    parsed = message_from_bytes(message.as_bytes(), policy=default)
    assert (parsed["Subject"], parsed["In-Reply-To"], parsed["References"]) == ("Re: Quick question", ID2,
                                                                               f"{ID1} {ID2}")
    assert ThreadHeaders("New").items() == [("Subject", "New")]
