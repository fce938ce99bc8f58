"""The samples of output in README.md and docs/ are what the tool prints now (tools/docs_samples.py makes them):
the plain ones here on every run, the simulation's in the slow tier; and no block of output goes unaccounted for."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tools import docs_samples
from tools.docs_samples import ROOT, SAMPLES, blocks, pages, run, synopsis_problems, unaccounted

SIMULATION_PAGE = ROOT / "docs" / "simulation.md"


def copy_pages(into: Path) -> Path:
    """README.md and docs/*.md in a directory of their own, to alter without touching the real ones."""
    (into / "docs").mkdir()
    for page in pages(ROOT):
        shutil.copyfile(page, into / page.relative_to(ROOT))
    return into


def marked(page: Path, sample_id: str) -> docs_samples.Block:
    return next(block for block in blocks(page) if block.sample_id == sample_id)


def test_every_block_of_output_is_generated_or_says_why_not() -> None:
    assert unaccounted(ROOT) == []
    used = {block.sample_id for page in pages(ROOT) for block in blocks(page)}
    assert sorted(set(SAMPLES) - used) == [], "a registered sample no page shows"


def test_a_new_unmarked_sample_an_unknown_id_and_a_stale_exemption_are_each_named(tmp_path: Path) -> None:
    root = copy_pages(tmp_path)
    page = root / "docs" / "oncall.md"
    text = page.read_text()
    page.write_text(text.replace("<!-- sample: pool-status-no-hosts -->", "<!-- sample: no-such-sample -->")
                    + "\n```console\n$ sendhost pool plan --sends-per-day 100\n```\n")
    (root / "docs" / "warmup.md").write_text("# nothing here now\n")
    found = unaccounted(root)
    new_line = len(text.splitlines()) + 2
    assert found[0].startswith(f"docs/oncall.md:{new_line}: a block that looks like output")
    assert sum("NOT_GENERATED lists a block" in problem and "docs/warmup.md" in problem for problem in found) == 3
    report = run(root, only={"pool-status-no-hosts"}, out=lambda text: None)
    assert f"docs/oncall.md:{marked(page, 'no-such-sample').line}: sample 'no-such-sample' is not in SAMPLES" \
        in report.problems


def test_every_synopsis_names_exactly_its_commands_options(tmp_path: Path) -> None:
    assert synopsis_problems(ROOT) == []
    root = copy_pages(tmp_path)
    page = root / "docs" / "simulation.md"
    page.write_text(page.read_text().replace("[--seed S]", "[--sead S]"))
    line = next(block.line for block in blocks(page) if block.first_line.startswith("sendhost simulate ["))
    assert synopsis_problems(root) == [
        f"docs/simulation.md:{line}: the synopsis of `sendhost simulate` names --sead, which it does not have",
        f"docs/simulation.md:{line}: the synopsis of `sendhost simulate` leaves out --seed",
    ]


def test_check_fails_on_an_altered_copy_naming_the_sample_and_write_puts_it_back(tmp_path: Path,
                                                                                capsys: pytest.CaptureFixture[str]
                                                                                ) -> None:
    root = copy_pages(tmp_path)
    page = root / "docs" / "simulation.md"
    page.write_text(page.read_text().replace("simulate 1 to 365 days", "simulate 1 to 366 days"))
    line = marked(page, "simulate-bad-input").line

    assert docs_samples.main(["--check", "--root", str(root), "--only", "simulate-bad-input"]) == 1
    said = capsys.readouterr().out
    assert said.startswith(f"docs/simulation.md:{line}: sample simulate-bad-input is stale\n")
    assert "-error: --days 0: simulate 1 to 366 days, e.g. --days 14\n" in said
    assert "+error: --days 0: simulate 1 to 365 days, e.g. --days 14\n" in said

    assert docs_samples.main(["--write", "--root", str(root), "--only", "simulate-bad-input"]) == 0
    assert page.read_bytes() == SIMULATION_PAGE.read_bytes()  # the block rewritten, every other byte as it was
    assert docs_samples.main(["--check", "--root", str(root), "--only", "simulate-bad-input"]) == 0


def test_a_command_exiting_otherwise_than_its_sample_says_is_a_broken_run_not_a_sample() -> None:
    with pytest.raises(docs_samples.BrokenRun, match=r"`sendhost simulate --days 0` exited 2, the sample expects 0"):
        docs_samples.produce(docs_samples.Sample("plain", (docs_samples.sendhost("simulate", "--days", "0"),)))


def test_bad_arguments_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--check", "--only", "nope"], ["--check", "--root", str(tmp_path)], []):
        with pytest.raises(SystemExit) as exit_:
            docs_samples.main(argv)
        assert exit_.value.code == 2
    assert "--only nope: no such sample" in capsys.readouterr().err


@pytest.mark.service  # the embedded Redis, and a reader's `python` for the Python example's sample
def test_the_plain_samples_are_what_the_tool_prints_now() -> None:
    report = run(ROOT, worlds=("plain",), out=lambda text: None)
    assert report.stale == [], "run `make docs-samples`:\n" + "\n".join(report.stale)
    assert report.problems == []


@pytest.mark.slow  # one whole `sendhost simulate` (two weeks of the example; a CPU-minute or more)
@pytest.mark.service
def test_the_simulation_sample_and_the_figures_its_prose_states_are_todays_run() -> None:
    sample = SAMPLES["simulate-default"]
    printed = docs_samples.printed(sample)
    assert sample.excerpt is not None
    assert list(marked(SIMULATION_PAGE, "simulate-default").body) == sample.excerpt(printed), \
        "run `make docs-samples`"
    # The prose under the sample reads figures off the run, some from the rows the excerpt leaves out.
    stdout = "\n".join(printed)
    assert [f"each of the {n} rotations" for n in _measure(stdout, "rotations")] == \
        _stated(r"each of the \d+ rotations")
    assert [f"AWS's {n} hand-backs" for n in _measure(stdout, "redraws")] == _stated(r"AWS's \d+ hand-backs")
    cost = re.findall(r"= (\$\d+\.\d\d) at", stdout)
    assert [f"the parked EIPs cost {c}" for c in cost] == _stated(r"the parked EIPs cost \$\d+\.\d\d")
    # the addresses the server saw: as many as the table folded to its busiest says, or a row each
    folded = re.search(r"the \d+ busiest of (\d+) shown; every row: --format json \(deliveries\.per_source\)", stdout)
    sources = int(folded[1]) if folded else len(re.findall(r"^│ 127\.", stdout, re.MULTILINE))
    assert [f"saw {sources} source addresses"] == _stated(r"saw \d+ source addresses")


def _measure(stdout: str, name: str) -> list[str]:
    """The leading number of one row of the summary table."""
    return re.findall(rf"^│ {re.escape(name)} +│ (\d+)", stdout, re.MULTILINE)


def _stated(pattern: str) -> list[str]:
    """Where docs/simulation.md's prose states a figure of the run (line breaks read as spaces)."""
    return re.findall(pattern, re.sub(r"\s+", " ", SIMULATION_PAGE.read_text()))
