"""The leads CSV: canonical addresses, merge fields, time zones, duplicates, and refusals naming file:line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sender.campaigns.leads import Lead, LeadsError, read_leads
from sender.campaigns.spec import CampaignSpec, load_campaign
from tests.conftest import REPO_ROOT
from tests.sender.campaigns.test_spec import MINIMAL  # first_name with fallback; company without, in step 2


@pytest.fixture
def spec(tmp_path: Path) -> CampaignSpec:
    path = tmp_path / "campaign.yml"
    path.write_text(MINIMAL + "timezone: Europe/Berlin\n", encoding="utf-8")
    return load_campaign(path)


def write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "leads.csv"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", newline="")
    return path


def refused(tmp_path: Path, spec: CampaignSpec, text: str | bytes, **limits: int) -> str:
    path = write(tmp_path, text)
    with pytest.raises(LeadsError) as raised:
        read_leads(path, spec, **limits)
    assert raised.value.exit_code == 2
    message = str(raised.value)
    assert message.startswith(f"{path}:"), message
    return message.removeprefix(f"{path}:")


def test_each_row_is_a_lead_with_its_canonical_address_id_time_zone_and_merge_fields(
        tmp_path: Path, spec: CampaignSpec) -> None:
    result = read_leads(write(tmp_path, "address,lead,timezone,first_name,company,city\r\n"
                                        "Eve@Bigco.Example,crm-1,America/New_York, Eve ,Bigco,Paris\r\n"
                                        "frank@rcpt.example,,,,Initech,\r\n"), spec)
    assert result.leads == (
        Lead(2, "eve@bigco.example", "crm-1", "America/New_York",
             {"first_name": "Eve", "company": "Bigco", "city": "Paris"}),
        Lead(3, "frank@rcpt.example", None, "Europe/Berlin", {"first_name": "", "company": "Initech", "city": ""}),
    )
    assert (result.report.rows, result.report.duplicates) == (2, 0)


def test_a_time_zone_absent_or_invalid_is_the_campaigns_and_counted(tmp_path: Path, spec: CampaignSpec) -> None:
    result = read_leads(write(tmp_path, "address,timezone,company\n"
                                        "a@rcpt.example,,X\nb@rcpt.example,Mars/Olympus,X\n"
                                        "c@rcpt.example,../../etc/passwd,X\nd@rcpt.example,Asia/Tokyo,X\n"), spec)
    assert [lead.timezone for lead in result.leads] == ["Europe/Berlin"] * 3 + ["Asia/Tokyo"]
    assert (result.report.timezone_absent, result.report.timezone_invalid) == (1, 2)
    assert result.report.timezone_defaulted == 3
    assert result.report.timezone_absent_lines == (2,)
    assert result.report.timezone_invalid_lines == ((3, "Mars/Olympus"), (4, "../../etc/passwd"))


def test_the_first_few_lines_of_each_defaulted_time_zone_are_named(tmp_path: Path, spec: CampaignSpec) -> None:
    rows = "".join(f"a{n}@rcpt.example,{'' if n % 2 else 'Europe/Berln'},X\n" for n in range(20))
    result = read_leads(write(tmp_path, "address,timezone,company\n" + rows + "a0@rcpt.example,,X\n"), spec)
    assert (result.report.timezone_absent, result.report.timezone_invalid) == (10, 10)  # the repeat is no lead
    assert result.report.timezone_absent_lines == (3, 5, 7, 9, 11)
    assert result.report.timezone_invalid_lines == tuple((line, "Europe/Berln") for line in (2, 4, 6, 8, 10))


def test_no_timezone_column_means_every_lead_sends_in_the_campaigns(tmp_path: Path, spec: CampaignSpec) -> None:
    result = read_leads(write(tmp_path, "address,company\na@rcpt.example,X\n"), spec)
    assert result.leads[0].timezone == "Europe/Berlin" and result.report.timezone_absent == 1


def test_one_address_spelled_twice_is_one_lead_the_first_row_and_the_rest_counted(
        tmp_path: Path, spec: CampaignSpec) -> None:
    result = read_leads(write(tmp_path, "address,lead,company\n"
                                        "eve@bigco.example,1,First\nEve@BigCo.Example,2,Second\n"
                                        "other@rcpt.example,3,X\n EVE@bigco.example ,4,Third\n"), spec)
    assert [(lead.address, lead.lead_id) for lead in result.leads] == [("eve@bigco.example", "1"),
                                                                     ("other@rcpt.example", "3")]
    assert result.report.rows == 4 and result.report.duplicates == 2
    assert result.report.duplicate_lines == ((3, 2), (5, 2))


def test_a_byte_order_mark_and_blank_lines_are_no_trouble(tmp_path: Path, spec: CampaignSpec) -> None:
    result = read_leads(write(tmp_path, "\ufeffemail,company\n\na@rcpt.example,X\n\n\nb@rcpt.example,Y\n"), spec)
    assert [(lead.line, lead.address) for lead in result.leads] == [(3, "a@rcpt.example"), (6, "b@rcpt.example")]


@pytest.mark.parametrize("separator", [";", "\t"])
def test_a_file_saved_with_semicolons_or_tabs_reads_as_one_with_commas(tmp_path: Path, spec: CampaignSpec,
                                                                         separator: str) -> None:
    # Spreadsheets in many locales save "CSV" with semicolons: the header says which separator the file uses.
    rows = [["email", "lead", "first_name", "company"], ["Eve@Bigco.Example", "crm-1", "Eve", "Bigco, Inc."],
            ["frank@rcpt.example", "crm-2", "", "Initech"]]
    text = "".join(separator.join(f'"{v}"' if "," in v else v for v in row) + "\r\n" for row in rows)
    result = read_leads(write(tmp_path, text), spec)
    assert [(lead.address, lead.lead_id, dict(lead.fields)) for lead in result.leads] == [
        ("eve@bigco.example", "crm-1", {"first_name": "Eve", "company": "Bigco, Inc."}),
        ("frank@rcpt.example", "crm-2", {"first_name": "", "company": "Initech"})]
    name = {";": "semicolons", "\t": "tabs"}[separator]
    assert refused(tmp_path, spec, text + separator.join(["a@rcpt.example", "x", "y", "z", "extra"]) + "\r\n") == (
        f"4: row: 5 values for 4 columns; quote values that contain {name}")


def test_the_shipped_example_leads_read_against_the_shipped_example_campaign() -> None:
    spec = load_campaign(REPO_ROOT / "campaign.example.yml")
    result = read_leads(REPO_ROOT / "leads.example.csv", spec)
    assert [lead.address for lead in result.leads] == ["eve@rcpt.example", "frank@rcpt.example", "grace@rcpt.example"]
    assert result.report.timezone_absent == 1 and result.leads[1].timezone == "Europe/Berlin"


@pytest.mark.parametrize(("text", "expected"), [
    ("", "1: header: empty file"),
    ("lead,company\n1,X\n", "1: header: no address column (the columns are lead, company)"),
    ("address,first_name\na@rcpt.example,Eve\n",
     "1: header: no company column, and steps[2].body uses {company} without a fallback; add the column, or write "
     "{company|...}"),
    ("address,company,company\n", "1: company: this column appears twice"),
    ("address,company,First Name\n", "1: First Name: not a merge field name"),
    ("address,company,unsubscribe_url\n", "1: unsubscribe_url: built into every message"),
    ("address,company\na@rcpt.example,X\nx:eve@rcpt.example,X\n",
     "3: address: 'x:eve@rcpt.example' is not a plain address: ':' means a group"),
    ('address,company\n"eve(hi)@rcpt.example",X\n', "2: address: 'eve(hi)@rcpt.example' is not a plain address"),
    ('address,company\n"Eve <eve@rcpt.example>",X\n', "2: address: 'Eve <eve@rcpt.example>' is not a plain address"),
    ("address,company\n,X\n", "2: address: empty address"),
    ("address,company\n=?utf-8?q?eve?=@rcpt.example,X\n",
     "2: address: holds encoded-word syntax ('=?...?=') at character 1"),
    ("address,company\na@rcpt.example,=?utf-8?q?x=0D=0AReply-To:_evil@x?=\n",
     "2: company: holds encoded-word syntax ('=?...?=') at character 1"),
    ("address,company\na@rcpt.example,\n",
     "2: company: empty, and steps[2].body uses {company} without a fallback; fill it, or write {company|...}"),
    ("address,company\na@rcpt.example,X,extra\n", "2: row: 3 values for 2 columns"),
    ("address,company\na@rcpt.example\n", "2: row: 1 values for 2 columns"),
    ('address,company\na@rcpt.example,"Big\r\nco"\n', "2: company: holds a carriage return (CR) at character 4"),
    ('address,company\na@rcpt.example,X\nb@rcpt.example,"Big\nco"\n', "3: company: holds a line feed (LF)"),
    ("address,company\na@rcpt.example,Big\x00co\n", "2: company: holds a NUL"),
    ("address,company,first_name\na@rcpt.example,X,\x1b[2JEve\n", "2: first_name: holds an escape (ESC)"),
    ("address,lead,company\na@rcpt.example,\x9b31m,X\n", "2: lead: holds a terminal control sequence introducer"),
    ("address,company\na@rcpt.example," + "x" * 4097 + "\n", "2: company: 4097 characters; a value has at most 4096"),
    ("address,lead,company\na@rcpt.example," + "x" * 201 + ",X\n", "2: lead: 201 characters; an id has at most 200"),
])
def test_a_bad_leads_file_is_refused_naming_the_line_and_column(tmp_path: Path, spec: CampaignSpec, text: str,
                                                                expected: str) -> None:
    assert refused(tmp_path, spec, text).startswith(expected)


def test_text_that_is_not_utf8_is_refused(tmp_path: Path, spec: CampaignSpec) -> None:
    assert refused(tmp_path, spec, b"address,company\na@rcpt.example,Caf\xe9\n").startswith(
        " not UTF-8 text; save the CSV as UTF-8")


def test_a_missing_file_is_refused_naming_it(tmp_path: Path, spec: CampaignSpec) -> None:
    with pytest.raises(LeadsError, match=re.escape(f"{tmp_path / 'none.csv'}: no such file")):
        read_leads(tmp_path / "none.csv", spec)


def test_a_line_longer_than_the_limit_is_refused_before_it_is_read_whole(tmp_path: Path, spec: CampaignSpec) -> None:
    assert refused(tmp_path, spec, "address,company\na@rcpt.example," + "x" * 200 + "\n", max_line=100) == \
        "2: a line longer than 100 characters; is this a CSV of leads?"


def test_a_file_with_more_rows_than_the_limit_is_refused(tmp_path: Path, spec: CampaignSpec) -> None:
    rows = "".join(f"l{n}@rcpt.example,X\n" for n in range(4))
    assert read_leads(write(tmp_path, "address,company\n" + rows), spec, max_rows=4).report.rows == 4
    assert refused(tmp_path, spec, "address,company\n" + rows + "z@rcpt.example,X\n", max_rows=4) == \
        "6: row: more than 4 rows; split the file and add each part"


def test_more_columns_than_the_limit_are_refused(tmp_path: Path, spec: CampaignSpec) -> None:
    header = "address,company," + ",".join(f"f{n}" for n in range(99))
    assert refused(tmp_path, spec, header + "\n") == "1: header: 101 columns; at most 100"
