"""Header and terminal safety: what would break a header line or a terminal is named, the rest passes."""

from __future__ import annotations

import pytest

from sender.safe_text import header_problem, text_problem


@pytest.mark.parametrize("value", ["Quick question, Eve", "Grüße aus Köln 👋", "tab\there", ""])
def test_a_plain_line_fits_a_header_and_a_body(value: str) -> None:
    assert header_problem(value) is None
    assert text_problem(value) is None


@pytest.mark.parametrize(("value", "named"), [
    ("Hi\r\nBcc: all@rcpt.example", "a carriage return (CR) at character 3"),
    ("Hi\nthere", "a line feed (LF) at character 3"),
    ("Hi\x00", "a NUL at character 3"),
    ("\x1b[2JHi", "an escape (ESC) at character 1"),
    ("Hi\x9b2J", "a terminal control sequence introducer (CSI)"),
    ("Hi\x7f", "the control character '\\x7f'"),
    ("Hi\u2028there", "the control character '\\u2028'"),
])
def test_a_header_value_with_a_line_break_or_a_control_character_is_refused_by_name(value: str, named: str) -> None:
    problem = header_problem(value)
    assert problem is not None and named in problem


def test_a_body_may_break_lines_but_not_hold_nul_cr_or_escape_sequences() -> None:
    assert text_problem("Hi Eve,\n\n\tthanks") is None
    for value, named in (("a\x00", "NUL"), ("a\r\nb", "carriage return"), ("\x1b]0;title\x07", "escape"),
                         ("\x9b31m", "CSI")):
        problem = text_problem(value)
        assert problem is not None and named in problem, value


@pytest.mark.parametrize("value", ["=?utf-8?q?x=0D=0AReply-To:_evil@x?=", "Hi =?utf-8?b?RXZl?=", "a=?x?q?y?=b"])
def test_a_header_value_with_encoded_word_syntax_is_refused_because_a_reader_decodes_it(value: str) -> None:
    problem = header_problem(value)
    assert problem is not None and "encoded-word syntax" in problem


def test_the_messages_policy_refuses_an_encoded_word_rather_than_decoding_it_into_headers() -> None:
    from sender.sending.message import build_message

    with pytest.raises(ValueError, match="encoded-word syntax"):
        build_message(mailbox="sales@mail.example", to="eve@rcpt.example",
                      subject="=?utf-8?q?x=0D=0AReply-To:_evil@x?=", text="Hi", message_id="<k@mail.example>",
                      unsubscribe="https://u.example/u/t")
