"""The model's credential: one reader for every login's secret, each failure naming the mailbox and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from sendhost.errors import ConfigError, SecretUnavailable
from sendhost.model import Credential


def test_a_password_comes_from_its_variable_or_its_file(tmp_path: Path) -> None:
    secret_file = tmp_path / "pw"
    secret_file.write_text("s3cret\n")
    assert Credential("a@ex.com", password_env="A_PW").secret({"A_PW": "from-env"}) == "from-env"
    assert Credential("a@ex.com", password_file=str(secret_file)).secret({}) == "s3cret"


def test_an_xoauth2_token_is_reread_at_each_call(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("ya29.first\n")
    credential = Credential("a@ex.com", auth="xoauth2", password_env="IGNORED", token_file=str(token))
    assert credential.secret({"IGNORED": "pw"}) == "ya29.first"
    token.write_text("ya29.second\n")
    assert credential.secret({}) == "ya29.second"


@pytest.mark.parametrize(("credential", "message"), [
    (Credential("a@ex.com", password_env="A_PW"),
     "environment variable A_PW (smtp password_env of a@ex.com) is not set; set it or use password_file"),
    (Credential("a@ex.com", "imap", password_env="A_IMAP"),
     "environment variable A_IMAP (imap password_env of a@ex.com) is not set; set it or use password_file"),
    (Credential("a@ex.com", "imap"),
     "mailbox a@ex.com: no password_file configured; add it to the mailbox's imap settings"),
    (Credential("a@ex.com", auth="xoauth2"),
     "mailbox a@ex.com: no token_file configured; add it to the mailbox (auth: xoauth2)"),
])
def test_a_missing_secret_names_the_mailbox_and_the_fix(credential: Credential, message: str) -> None:
    with pytest.raises(SecretUnavailable) as raised:
        credential.secret({})
    assert str(raised.value) == message
    assert isinstance(raised.value, ConfigError)  # bad configuration: exit 2


def test_an_unreadable_or_empty_file_is_named(tmp_path: Path) -> None:
    missing, empty = tmp_path / "missing", tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(SecretUnavailable) as raised:
        Credential("a@ex.com", password_file=str(missing)).secret({})
    assert str(raised.value) == (f"smtp password_file {missing} of a@ex.com: No such file or directory; "
                                 "write the secret there (mode 0600)")
    with pytest.raises(SecretUnavailable) as raised:
        Credential("a@ex.com", "imap", password_file=str(empty)).secret({})
    assert str(raised.value) == f"imap password_file {empty} of a@ex.com is empty; write the secret there (mode 0600)"
