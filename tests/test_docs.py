"""The README is a map: every relative link in it and in docs/*.md must land on a file, and on a heading when it
names one (GitHub's anchor rules), so a moved or renamed section shows up here rather than as a dead link."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_PARSER = MarkdownIt("commonmark").enable("table")


def _inline_tokens(text: str) -> Iterator[tuple[str, object]]:
    for token in _PARSER.parse(text):
        yield token.type, token
        for child in token.children or ():
            yield child.type, child


def github_slug(heading: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped (but `-` and `_`), each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor GitHub gives the page's headings; a repeated heading gets -1, -2, … appended."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    tokens = _PARSER.parse(page.read_text(encoding="utf-8"))
    for opening, inline in itertools.pairwise(tokens):
        if opening.type != "heading_open":
            continue
        slug = github_slug("".join(child.content for child in inline.children or ()))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(page: Path) -> list[str]:
    """Link targets outside code (spans and blocks), skipping absolute URLs and mail links."""
    links = []
    for kind, token in _inline_tokens(page.read_text(encoding="utf-8")):
        if kind != "link_open":
            continue
        href = str(token.attrGet("href") or "")
        if urlsplit(href).scheme:
            continue
        links.append(href)
    return links


def broken(page: Path, href: str, root: Path = ROOT) -> str | None:
    """Why the link does not resolve inside `root`, or None when it does."""
    parts = urlsplit(href)
    target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
    if not target.is_relative_to(root):
        return f"{href}: leaves the repository"
    if not target.exists():
        return f"{href}: no file {target.relative_to(root)}"
    if parts.fragment:
        if target.suffix != ".md":
            return f"{href}: an anchor into a file that is not markdown"
        if unquote(parts.fragment) not in anchors(target):
            return f"{href}: {target.relative_to(root)} has no heading with anchor #{parts.fragment}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_resolves_to_a_file_and_heading(page: Path) -> None:
    problems = [why for href in relative_links(page) if (why := broken(page, href))]
    assert problems == [], f"{page.relative_to(ROOT)}: broken links:\n" + "\n".join(problems)


def test_the_readme_links_every_reader_guide() -> None:
    links = set(relative_links(ROOT / "README.md"))
    for guide in ("infra", "ci-audit", "oncall", "python-api", "design", "benchmarks", "simulation"):
        assert f"docs/{guide}.md" in links, f"README.md does not link docs/{guide}.md"


def test_the_checker_catches_a_missing_file_a_missing_anchor_and_ignores_code(tmp_path: Path) -> None:
    # The checker itself, on a page written for the purpose: it must fail on what it claims to catch.
    (tmp_path / "other.md").write_text("# A `Title` (with punctuation)\n\n## Repeat\n\n## Repeat\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-title-with-punctuation) [twice](other.md#repeat-1) [self](#here)\n\n"
        "# Here\n\n[gone](nothere.md) [bad anchor](other.md#nope) [web](https://example.com/x.md)\n\n"
        "`[in code](nothere.md)`\n\n```\n[in a block](nothere.md)\n```\n"
    )
    assert relative_links(page) == ["other.md#a-title-with-punctuation", "other.md#repeat-1", "#here",
                                    "nothere.md", "other.md#nope"]
    failing = [href for href in relative_links(page) if broken(page, href, tmp_path.resolve())]
    assert failing == ["nothere.md", "other.md#nope"]


# --- figures and codes the tool itself states -------------------------------------------------------------------

def emitted_finding_codes() -> set[str]:
    """Every finding code dns_audit can emit, read from its source (not from the catalog, which could hold codes
    no check emits): each string of the form `area.name` whose area is a check's (or `audit`, `message`), and each
    `f"{name}.suffix"` code built from a check's name (`{name}.lookup_failed`, `{name}.skipped`)."""
    import ast

    from dns_audit.audit import CHECK_ORDER

    areas = {*CHECK_ORDER, "audit", "message", "placement"}
    code = re.compile(r"([a-z_]+)\.[a-z_]+")
    found: set[str] = set()
    suffixes: set[str] = set()
    for path in sorted((ROOT / "dns_audit").rglob("*.py")):
        if path.name == "findings.py":  # the catalog itself
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                match = code.fullmatch(node.value)
                if match and match.group(1) in areas:
                    found.add(node.value)
            elif (isinstance(node, ast.JoinedStr) and len(node.values) == 2
                  and isinstance(node.values[0], ast.FormattedValue) and isinstance(node.values[1], ast.Constant)
                  and re.fullmatch(r"\.[a-z_]+", str(node.values[1].value))):
                suffixes.add(str(node.values[1].value))
    from dns_audit.findings import CATALOG

    found |= {check + suffix for check in CHECK_ORDER for suffix in suffixes if check + suffix in CATALOG}
    return found


def test_every_finding_code_the_audit_can_emit_is_documented_in_ci_audit() -> None:
    from dns_audit.findings import CATALOG

    emitted = emitted_finding_codes()
    assert {"dkim.no_selector", "audit.no_data", "spf.not_followed", "ptr.skipped", "tls.lookup_failed"} <= emitted
    assert emitted <= set(CATALOG), "a code the source emits has no catalog entry"
    documented = set(re.findall(r"`([a-z_]+\.[a-z_]+)`", (ROOT / "docs" / "ci-audit.md").read_text()))
    assert sorted(emitted - documented) == [], "add these codes to docs/ci-audit.md's table"


@pytest.mark.parametrize("redraw_rate", ["0.05", "1.15"])
def test_oncall_states_the_plan_figures_pool_plan_prints(redraw_rate: str) -> None:
    """docs/oncall.md quotes `pool plan` for 30,000 sends/day on 4 hosts x 5 slots of the example inventory, at the
    default redraw rate and at bench/reuse.py's 1.15: each figure as the tool prints it now, with what it includes."""
    import json

    from tests.support.cli import run_cli

    result = run_cli("--inventory", str(ROOT / "inventory.example.yml"), "pool", "plan", "--sends-per-day", "30000",
                     "--hosts", "4", "--slots", "5", "--redraw-rate", redraw_rate, "--format", "json",
                     env={"AWS_EC2_METADATA_DISABLED": "true"})  # no credentials: the quota line says unknown
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    cost = plan["cost_usd_per_month"]
    stated = (f"{plan['eips_needed']} EIPs, {plan['eip_calls_per_day']:,.0f} calls/day, ${cost['total']:,.2f}/month"
              f"{',' if redraw_rate == '0.05' else ' for the same pool,'} of which public IPv4 is ${cost['ipv4']:,.2f}"
              f" and remaps {'the same ' if redraw_rate != '0.05' else ''}${cost['remaps']:,.2f}")
    page = re.sub(r"\s+", " ", (ROOT / "docs" / "oncall.md").read_text())
    assert stated in page
