"""Messages and unsubscribe tokens (no I/O)."""

from __future__ import annotations

from pathlib import Path

from sender.sending.message import build_message, message_id_for
from sender.sending.tokens import make_token, verify_token

KEY = b"k" * 32


def test_token_names_the_row_and_resists_tampering() -> None:
    token = make_token(KEY, 4242)
    assert verify_token(KEY, token) == 4242
    assert verify_token(b"x" * 32, token) is None
    forged = make_token(KEY, 4243)[:11] + token[11:]
    assert verify_token(KEY, forged) is None
    assert verify_token(KEY, "not-a-token!") is None


def test_placeholder_is_replaced_and_no_link_is_added_twice() -> None:
    url = "https://u.example.test/u/abc"
    placed = build_message(mailbox="a@s.example", to="b@r.example", subject="s", text="Hi\n{unsubscribe_url}\nBye",
                           message_id="<1@s.example>", unsubscribe=url)
    assert placed.get_content() == f"Hi\n{url}\nBye\n"
    appended = build_message(mailbox="a@s.example", to="b@r.example", subject="s", text="Hi", message_id="<1@s>",
                             unsubscribe=url)
    assert appended.get_content().count(url) == 1
    assert appended["List-Unsubscribe"] == f"<{url}>, <mailto:a@s.example?subject=unsubscribe>"


def test_message_id_is_the_idempotency_key_at_the_mailbox_domain() -> None:
    assert message_id_for("0d3c", "box@Sender.example") == "<0d3c@Sender.example>"


def test_key_file(tmp_path: Path) -> None:
    import pytest

    from sender.errors import SenderConfigError
    from sender.sending.tokens import read_key_file

    hex_key = tmp_path / "hex.key"
    hex_key.write_text("ab" * 32 + "\n")
    assert read_key_file(str(hex_key)) == bytes.fromhex("ab" * 32)
    short = tmp_path / "short.key"
    short.write_text("abcd")
    with pytest.raises(SenderConfigError, match="holds 2 bytes; write at least 32"):
        read_key_file(str(short))
    with pytest.raises(SenderConfigError, match="No such file"):
        read_key_file(str(tmp_path / "missing.key"))
