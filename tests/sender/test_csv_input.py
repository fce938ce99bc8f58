"""A CSV that cannot be read: the same words for the enqueue CSV and the leads CSV, naming the file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sender.campaigns.leads import LeadsError, read_leads
from sender.campaigns.spec import load_campaign
from sender.errors import SenderConfigError
from sender.ledger.csvfile import read_rows
from tests.conftest import REPO_ROOT

ENQUEUE_HEADER = "lead,step,address,group,subject,text\n"


@pytest.mark.parametrize(("content", "expected"), [
    (None, "no such file; pass the CSV to enqueue"),
    (ENQUEUE_HEADER.encode() + b"l1,1,a@rcpt.example,default,Caf\xe9,x\n", "not UTF-8 text; save the CSV as UTF-8"),
    ((ENQUEUE_HEADER + 'l1,1,a@rcpt.example,default,s,"' + "x" * 131_073 + '"\n').encode(),
     "malformed CSV: field larger than field limit (131072)"),
])
def test_the_enqueue_csv_names_the_file_it_cannot_read(tmp_path: Path, content: bytes | None, expected: str) -> None:
    path = tmp_path / "rows.csv"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(SenderConfigError, match=re.escape(f"{path}: {expected}")):
        read_rows(path)


def test_the_leads_csv_says_the_same_with_its_own_error(tmp_path: Path) -> None:
    spec = load_campaign(REPO_ROOT / "campaign.example.yml")
    path = tmp_path / "leads.csv"
    path.write_text('address,company\na@rcpt.example,"' + ("x" * 1000 + "\n") * 140 + '"\n', encoding="utf-8")
    with pytest.raises(LeadsError, match=re.escape(f"{path}: malformed CSV: field larger than field limit")):
        read_leads(path, spec)


@pytest.mark.parametrize(("row", "expected"), [
    ("l1,1,a@rcpt.example,default,\"Hi\r\nBcc: x@evil.example\",x\n", "subject: holds a carriage return (CR)"),
    ("l1,1,a@rcpt.example,default,Hi \x1b[2J,x\n", "subject: holds an escape (ESC)"),
    ("l1,1,a@rcpt.example,default,Hi,te\x00xt\n", "text: holds a NUL at character 3"),
])
def test_the_enqueue_csv_refuses_a_control_character_naming_file_line_and_column(
        tmp_path: Path, row: str, expected: str) -> None:
    path = tmp_path / "rows.csv"
    path.write_text(ENQUEUE_HEADER + row, encoding="utf-8", newline="")
    with pytest.raises(SenderConfigError, match=re.escape(f"{path}:2: {expected}")):
        read_rows(path)


@pytest.mark.parametrize(("row", "expected"), [
    ("l1,1,=?utf-8?q?eve?=@rcpt.example,default,Hi,x\n",
     "address: '=?utf-8?q?eve?=@rcpt.example' is not a plain address: '=?...?=' is an encoded word"),
    ("l1,1,a@rcpt.example,default,=?utf-8?q?x=0D=0AReply-To:_evil@x?=,x\n", "subject: holds encoded-word syntax"),
])
def test_the_enqueue_csv_refuses_encoded_words_in_an_address_or_a_subject(tmp_path: Path, row: str,
                                                                         expected: str) -> None:
    """A header parser decodes them into another address (the suppression check saw one, RCPT TO another) or into
    headers of their own."""
    path = tmp_path / "rows.csv"
    path.write_text(ENQUEUE_HEADER + row, encoding="utf-8")
    with pytest.raises(SenderConfigError, match=re.escape(f"{path}:2: {expected}")):
        read_rows(path)


def test_the_enqueue_csv_reads_to_the_address_columns_old_name_as_address(tmp_path: Path) -> None:
    old = tmp_path / "old.csv"
    old.write_text("lead,step,to,group,subject,text\nL1,1,Eve@Rcpt.example,sales,Hi,x\n", encoding="utf-8")
    new = tmp_path / "new.csv"
    new.write_text("lead,step,address,group,subject,text\nL1,1,Eve@Rcpt.example,sales,Hi,x\n", encoding="utf-8")
    assert [row.params() for row in read_rows(old)] == [row.params() for row in read_rows(new)]
    assert read_rows(new)[0].address == "eve@rcpt.example"
    both = tmp_path / "both.csv"
    both.write_text("lead,step,address,to,group,subject,text\n", encoding="utf-8")
    with pytest.raises(SenderConfigError, match=r"both.csv:1: column address appears twice \(to is its old name"):
        read_rows(both)


def test_the_leads_csv_reads_email_the_address_columns_old_name_as_address(tmp_path: Path) -> None:
    spec = load_campaign(REPO_ROOT / "campaign.example.yml")
    old = tmp_path / "old.csv"
    old.write_text("email,lead,first_name,company\nEve@Rcpt.example,crm-1,Eve,Bigco\n", encoding="utf-8")
    new = tmp_path / "new.csv"
    new.write_text("address,lead,first_name,company\nEve@Rcpt.example,crm-1,Eve,Bigco\n", encoding="utf-8")
    assert read_leads(old, spec).leads == read_leads(new, spec).leads
    assert read_leads(new, spec).leads[0].address == "eve@rcpt.example"
    both = tmp_path / "both.csv"
    both.write_text("address,email,company\n", encoding="utf-8")
    with pytest.raises(LeadsError, match=r"both\.csv:1: email: email is the old name of the address column; keep one"):
        read_leads(both, spec)
