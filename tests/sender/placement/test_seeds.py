"""Reading a seed (sender.placement.seeds) on a real Dovecot that marks no folder \\Junk: the spam folder is found
by the provider's name for it (Yahoo's `Bulk`), another folder is `other`, a token in no folder is not found, and a
seed that cannot be logged in to says why instead of "not found". Gmail's categories come from X-GM-LABELS, which
only Gmail sends: its parsing is checked on the FETCH lines Gmail answers with."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sender.placement.seeds import _category, look
from sendhost.model import Credential, ImapSettings, Seed
from tests.support.dovecot import Dovecot, dovecot_server

SEED = "seed@yahoo.test"


@pytest.fixture(scope="module")
def imap() -> Iterator[Dovecot]:
    with dovecot_server({SEED: "pw"}) as server:
        server.create(SEED, "Bulk")
        server.create(SEED, "Receipts")
        yield server


def seed(imap: Dovecot, password_env: str = "SENDHOST_SECRET_SEED") -> Seed:
    return Seed(SEED, "yahoo", ImapSettings(imap.host, imap.imaps_port, "tls", SEED,
                                            Credential(SEED, "imap", password_env=password_env),
                                            ca_file=str(imap.ca_file)))


def message(token: str) -> bytes:
    return (f"From: box@sender.example\r\nTo: {SEED}\r\nSubject: a note\r\n"
            f"Authentication-Results: mx.test; dkim=pass header.d=sender.example\r\n\r\nHello\r\n\r\nref {token}\r\n"
            ).encode()


def test_spam_by_the_providers_name_other_folders_and_not_found(imap: Dovecot) -> None:
    imap.append(SEED, message("shbulk1"), "Bulk")
    imap.append(SEED, message("shinbox1"), "INBOX")
    imap.append(SEED, message("shother1"), "Receipts")
    looked = look(seed(imap), ["shbulk1", "shinbox1", "shother1", "shnowhere1"], env={"SENDHOST_SECRET_SEED": "pw"})
    assert looked.failed is None
    assert {token: (f.placement, f.folder) for token, f in looked.found.items()} == {
        "shbulk1": ("spam", "Bulk"), "shinbox1": ("inbox", "INBOX"), "shother1": ("other", "Receipts")}
    assert looked.found["shinbox1"].arrived_at is not None
    assert looked.found["shinbox1"].message["Authentication-Results"].startswith("mx.test; dkim=pass")


def test_a_seed_that_cannot_be_read_says_why(imap: Dovecot) -> None:
    looked = look(seed(imap), ["shinbox1"], env={"SENDHOST_SECRET_SEED": "wrong"})
    assert looked.found == {}
    assert looked.failed is not None and looked.failed.startswith(f"IMAP login as {SEED} refused")
    unset = look(seed(imap), ["shinbox1"], env={})
    assert unset.failed == (f"environment variable SENDHOST_SECRET_SEED (imap password_env of {SEED}) is not set; "
                            "set it or use password_file")


@pytest.mark.parametrize(("line", "category"), [
    (b'1 (X-GM-LABELS ("\\\\Inbox" "\\\\Important" "Promotions") UID 7 INTERNALDATE "07-Dec-2026 09:00:00 +0000"',
     "promotions"),
    (b'1 (X-GM-LABELS (\\Inbox CATEGORY_SOCIAL) UID 7', "social"),
    (b'1 (X-GM-LABELS (\\Inbox "\\\\Important") UID 7', None),
    (b'1 (UID 7 INTERNALDATE "07-Dec-2026 09:00:00 +0000"', None),
])
def test_gmail_categories_are_read_from_x_gm_labels(line: bytes, category: str | None) -> None:
    assert _category(line) == category
