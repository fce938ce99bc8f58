"""Messages and unsubscribe tokens (no I/O)."""

from __future__ import annotations

import uuid
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sender.sending.message import build_message, message_id_for
from sender.sending.tokens import make_row_id_token, make_token, verify_row_id_token, verify_token

KEY = b"k" * 32


def test_token_names_the_rows_idempotency_key_and_resists_tampering() -> None:
    key = uuid.uuid4()
    token = make_token(KEY, key)
    assert verify_token(KEY, token) == key
    assert verify_token(b"x" * 32, token) is None
    forged = make_token(KEY, uuid.uuid4())[:22] + token[22:]  # another key's payload under this tag
    assert verify_token(KEY, forged) is None
    assert verify_token(KEY, "not-a-token!") is None
    # the two forms never verify as each other: a row id is no idempotency key
    assert verify_row_id_token(KEY, token) is None
    assert verify_token(KEY, make_row_id_token(KEY, 4242)) is None
    assert verify_row_id_token(KEY, make_row_id_token(KEY, 4242)) == 4242


def _other_spellings(token: str, spare_bits: bool = True) -> list[str]:
    """Spellings a lenient base64 decoder reads as the same bytes (or that a browser or a mail client makes)."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(token[-1])
    # 43 characters of 32 bytes: 258 bits, the last 2 unused (32 of 24 bytes have none)
    same_bytes = [token[:-1] + alphabet[last ^ bit] for bit in (1, 2, 3)] if spare_bits else []
    spellings = [token + "!!!", token + "%20", token + " ", token + "=", token + "\n", token[:8] + "!" + token[8:],
                 token.swapcase(), token.upper(), *same_bytes]
    if "-" in token or "_" in token:
        spellings.append(token.replace("-", "+").replace("_", "/"))
    return spellings


def test_only_the_canonical_spelling_of_a_token_is_accepted() -> None:
    for n in range(20):  # keys whose tokens hold a `-` or `_`, and ones that do not
        key = uuid.UUID(int=n * 0x0123456789ABCDEF0123456789ABCDEF % (1 << 128))
        token = make_token(KEY, key)
        assert verify_token(KEY, token) == key
        for spelled in _other_spellings(token):
            assert verify_token(KEY, spelled) is None, spelled
        old = make_row_id_token(KEY, n)
        assert verify_row_id_token(KEY, old) == n
        for spelled in _other_spellings(old, spare_bits=False):
            assert verify_row_id_token(KEY, spelled) is None, spelled


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


# The agent's own path: compose's templates and build_message, serialized as submission hands it over.
_URL_TAIL = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=40)


@st.composite
def _base_urls(draw: st.DrawFn) -> str:
    labels = draw(st.lists(_URL_TAIL.filter(lambda s: s[0] != "-" and s[-1] != "-"), min_size=2, max_size=8))
    url = "https://" + ".".join(labels)
    path = draw(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789/-_", max_size=200))
    url = (url + "/" + path)[:200]
    return url if len(url) >= 20 else url + "/" + "p" * (20 - len(url) - 1)


def _line(size: int) -> st.SearchStrategy[str]:
    """Text the importers let into a header: one line, no controls, no encoded words (sender.safe_text)."""
    from sender.safe_text import header_problem

    return st.text(min_size=1, max_size=size).filter(lambda s: s.strip() != "" and header_problem(s) is None)


@settings(max_examples=200, deadline=None)
@given(base=_base_urls(), name=_line(60), subject=_line(120).filter(lambda s: not set(s) & {"{", "}"}),
       merge=_line(80), follow_up=st.booleans())
def test_the_agents_messages_pass_the_message_checks_header_rules_for_any_base_url(
        base: str, name: str, subject: str, merge: str, follow_up: bool) -> None:
    """Through the agent's own path: a claimed row composed (its merge fields rendered; a follow-up replies in the
    thread of its first step), built and serialized as submission hands it over."""
    from email.headerregistry import Address

    from dns_audit.message import body_link_findings, parse_message, unsubscribe_findings
    from sender.campaigns.template import render
    from sender.ledger.store import Claimed
    from sender.sending.compose import compose
    from sender.sending.message import SENDING_POLICY, unsubscribe_url

    mailbox = "sales@mail.example"
    url = unsubscribe_url(base, make_token(KEY, uuid.uuid4()))
    fields = {"first": merge, "signature": str(Address(name, addr_spec=mailbox))}
    template = "{first} " + subject
    earlier = ((render(template, fields), message_id_for(uuid.uuid4(), mailbox)),) if follow_up else ()
    row = Claimed(1, "eve@rcpt.example", 2 if follow_up else 1, "eve@rcpt.example", "sales", template,
                  "Hello {first},\n\n{signature}", 0, uuid.uuid4(), None, None, own_subject=not follow_up,
                  fields=fields, earlier=earlier)
    content = compose(row, url)
    message = build_message(mailbox=mailbox, to=row.address, subject=content.headers, text=content.body,
                            message_id=message_id_for(row.idempotency_key, mailbox), unsubscribe=url)
    raw = message.as_bytes(policy=SENDING_POLICY)
    parsed = parse_message(raw)
    found = unsubscribe_findings(parsed) + body_link_findings(parsed)
    assert found == []
    header = raw.split(b"\r\n\r\n", 1)[0].decode("ascii")
    assert f"List-Unsubscribe: <{url}>," in header
    assert "List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n" in header
    assert "=?" not in header.split("List-Unsubscribe:", 1)[1].split("\r\nList-Unsubscribe-Post")[0]
    assert ("In-Reply-To" in parsed) is follow_up
