"""Adding a campaign's leads (Campaigns.add_leads, sender_add_leads, and add_leads_file: `campaign add-leads`): each
row classified once, in order of precedence (already > suppressed > in another active campaign > added); each added
lead stored with its step 1 and the step's history event, the step-1 rows in the file's order."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from sender import Ledger
from sender.campaigns.keys import CampaignError
from sender.campaigns.leads import read_leads
from sender.campaigns.spec import load_campaign
from sender.ledger.campaigns import Campaigns, LeadOutcome, Move, add_leads_file

CAMPAIGN = """\
name: {name}
group: sales
fields: [first_name]
steps:
  - subject: "Hello {{first_name|there}}"
    body: "Hi {{first_name|there}}"
  - delay: 3d
    body: "Following up"
"""
LEADS = """\
address,lead,timezone,first_name
Eve@Bigco.example,crm-1,,Eve
mallory@rcpt.example,crm-2,,Mallory
zed@blocked.example,crm-3,,Zed
grace@rcpt.example,crm-4,Asia/Tokyo,Grace
heidi@rcpt.example,,,
"""


def _add(tmp_path: Path, ledger: Ledger, name: str, csv: str, extra: str = "") -> dict[LeadOutcome, tuple[int, int]]:
    """Apply campaign `name` (its file plus `extra`) and add the leads `csv`: {outcome: (count, first line)}."""
    path = tmp_path / f"{name}.yml"
    path.write_text(CAMPAIGN.format(name=name) + extra)
    spec = load_campaign(path, {"sales"})
    campaigns = Campaigns(ledger)
    campaigns.apply(spec, path.read_text())
    leads = tmp_path / f"{name}.csv"
    leads.write_text(csv)
    added = campaigns.add_leads(name, read_leads(leads, spec).leads)
    return {outcome: (count, added.first_lines.get(outcome, 0)) for outcome, count in added.counts.items()}


@pytest.fixture
def busy(tmp_path: Path, ledger: Ledger) -> Ledger:
    """A ledger where eve@bigco.example is in running campaign `one`, and mallory@rcpt.example and the domain
    blocked.example are suppressed."""
    _add(tmp_path, ledger, "one", "email\neve@bigco.example\n")
    Campaigns(ledger).move("one", Move.START)
    ledger.suppress("mallory@rcpt.example", "asked")
    ledger.suppress("@blocked.example", "asked by blocked")
    return ledger


def _campaign_rows(database_url: str, name: str) -> list[tuple[object, ...]]:
    with psycopg.connect(database_url) as conn:
        return conn.execute("""
            SELECT l.address, l.lead, l.timezone, l.fields, e.step, e.status::text, e.address, e.subject, v.kind,
                   v.detail
            FROM sender_leads l JOIN sender_campaigns c ON c.id = l.campaign_id
            JOIN sender_emails e ON e.lead_id = l.id
            JOIN sender_events v ON v.email_id = e.id
            WHERE c.name = %s ORDER BY e.id, v.id""", (name,)).fetchall()


def test_each_row_gets_one_outcome_by_precedence_and_the_file_line_it_first_appears_on(
        tmp_path: Path, busy: Ledger) -> None:
    outcomes = _add(tmp_path, busy, "two", LEADS)
    assert outcomes == {LeadOutcome.ADDED: (2, 5), LeadOutcome.ALREADY: (0, 0), LeadOutcome.SUPPRESSED: (2, 3),
                        LeadOutcome.OTHER_CAMPAIGN: (1, 2)}
    busy.suppress("grace@rcpt.example", "asked")  # in the campaign already: that comes first
    again = _add(tmp_path, busy, "two", LEADS)
    assert again == {LeadOutcome.ADDED: (0, 0), LeadOutcome.ALREADY: (2, 5), LeadOutcome.SUPPRESSED: (2, 3),
                     LeadOutcome.OTHER_CAMPAIGN: (1, 2)}


def test_an_added_lead_is_stored_with_its_step_one_and_its_history_in_the_files_order(
        tmp_path: Path, busy: Ledger, database_url: str) -> None:
    _add(tmp_path, busy, "two", LEADS)
    assert _campaign_rows(database_url, "two") == [
        ("grace@rcpt.example", "crm-4", "Asia/Tokyo", {"first_name": "Grace"}, 1, "waiting", "grace@rcpt.example",
         "Hello {first_name|there}", "waiting", "added to campaign two"),
        ("heidi@rcpt.example", None, "UTC", {"first_name": ""}, 1, "waiting", "heidi@rcpt.example",
         "Hello {first_name|there}", "waiting", "added to campaign two"),
    ]


def test_a_leads_file_added_names_the_campaign_holding_its_first_lead_refused_as_in_another(
        tmp_path: Path, busy: Ledger, database_url: str) -> None:
    _add(tmp_path, busy, "two", "address\nnobody@rcpt.example\n")
    (tmp_path / "more.csv").write_text(LEADS)
    done = add_leads_file(lambda: Ledger.from_url(database_url), "two", tmp_path / "more.csv")
    assert (done.spec.name, done.report.rows) == ("two", 5)
    assert (done.added.counts[LeadOutcome.OTHER_CAMPAIGN], done.added.first_lines[LeadOutcome.OTHER_CAMPAIGN]) == (1, 2)
    assert done.added.other_campaign == "one"
    (tmp_path / "fresh.csv").write_text("address\nnew@rcpt.example\n")
    fresh = add_leads_file(lambda: Ledger.from_url(database_url), "two", tmp_path / "fresh.csv")
    assert fresh.added.counts[LeadOutcome.ADDED] == 1 and fresh.added.other_campaign is None


def test_a_leads_file_for_no_campaign_is_refused_before_the_file_is_read(tmp_path: Path, ledger: Ledger,
                                                                         database_url: str) -> None:
    with pytest.raises(CampaignError, match="no campaign 'nope'; create it first with `sendhost campaign apply"):
        add_leads_file(lambda: Ledger.from_url(database_url), "nope", tmp_path / "absent.csv")


def test_a_running_campaign_that_allows_other_campaigns_takes_their_leads_queued(
        tmp_path: Path, busy: Ledger, database_url: str) -> None:
    _add(tmp_path, busy, "two", "email\nnobody@rcpt.example\n", "allow_other_campaigns: true\n")
    Campaigns(busy).move("two", Move.START)
    outcomes = _add(tmp_path, busy, "two", LEADS, "allow_other_campaigns: true\n")
    assert outcomes[LeadOutcome.ADDED] == (3, 2)
    assert outcomes[LeadOutcome.SUPPRESSED] == (2, 3)
    statuses = {row[0]: (row[5], row[8]) for row in _campaign_rows(database_url, "two")}
    assert statuses["eve@bigco.example"] == ("queued", "queued")


def test_a_lead_given_twice_to_the_ledger_is_refused_and_nothing_is_added(tmp_path: Path, ledger: Ledger,
                                                                          database_url: str) -> None:
    from sender.campaigns.leads import Lead
    from sender.errors import SenderConfigError

    _add(tmp_path, ledger, "two", "email\nfirst@rcpt.example\n")
    twice = [Lead(2, "dup@rcpt.example", None, "UTC", {}), Lead(3, "dup@rcpt.example", None, "UTC", {})]
    with pytest.raises(SenderConfigError, match="refused"):
        Campaigns(ledger).add_leads("two", twice)
    assert [row[0] for row in _campaign_rows(database_url, "two")] == ["first@rcpt.example"]


def test_an_import_runs_under_a_bound_for_its_size_not_the_ledgers_statement_timeout(tmp_path: Path,
                                                                                     ledger: Ledger) -> None:
    csv = "email\n" + "".join(f"lead{n}@rcpt.example\n" for n in range(5_000))
    ledger._conn.execute("SET statement_timeout = 50")  # far less than the import of 5,000 leads takes
    with pytest.raises(psycopg.errors.QueryCanceled):
        ledger._conn.execute("SELECT pg_sleep(0.2)")
    assert _add(tmp_path, ledger, "two", csv)[LeadOutcome.ADDED] == (5_000, 2)
    assert ledger._conn.execute("SHOW statement_timeout").fetchone() == ("50ms",)  # for the import's only
