"""The samples of sendhost's output in README.md and docs/*.md, regenerated from real runs of the tool.

    .venv/bin/python tools/docs_samples.py --write     # `make docs-samples`: rewrite every marked block in place
    .venv/bin/python tools/docs_samples.py --check     # exit 1 naming each stale sample (file:line, ID), with a diff
    .venv/bin/python tools/docs_samples.py --check --world plain      # only the fast ones (no simulation)

A fenced block whose line above is `<!-- sample: ID -->` is generated: SAMPLES says how (the commands and the
world they run in), and --write replaces the block's body with what they print. A block that shows output but
cannot be produced here (a real AWS account, a real host, a clock the CLI does not let us fix) is listed in
NOT_GENERATED with the reason; --check fails on a block that looks like output and is neither, so a new sample
cannot slip in unchecked. A synopsis (`sendhost dns audit [DOMAIN...] [--inventory PATH] ...`) is written by
hand, and --check fails when it names an option its command does not have or leaves out one it has.

What a command prints, as a sample shows it: `$ sendhost ARGS` (unless the sample shows output only), then its
stdout, then its stderr (where an error line ends up on a terminal: after the report), trailing spaces dropped.
Then substitutions(), each replacing one thing that differs from machine to machine with the fixed text the docs
show; nothing else is normalised, and the comparison is exact.

Worlds: "plain" is a fresh temporary directory holding a copy of inventory.example.yml as `inventory.yml` (as a
reader who copied the example has) and the sample's own files, with the embedded Redis and PostgreSQL started on
demand under its `.sendhost/` and stopped after; "simulation" is an empty temporary directory, for
`sendhost simulate` on the example inventory shipped in the package with its default seed (the slow one).
Exit 0 all current, 1 a sample is stale or a block unaccounted for, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import difflib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- sample: ([a-z0-9][a-z0-9-]*) -->$")
FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")
# A fenced block with one of these info strings shows what a command prints (or could); any other (yaml, python,
# sh, ini, csv, json) is text the reader writes or runs, and is not a sample.
OUTPUT_INFO = frozenset({"", "console", "text"})
WORLDS = ("plain", "simulation")


def pages(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


# --- what the markdown holds ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Block:
    """One fenced block of a page: `line` is its opening fence's (1-based); `body` the lines between the fences."""
    page: Path
    line: int
    info: str
    body: tuple[str, ...]
    sample_id: str | None  # from a marker on the line above

    @property
    def first_line(self) -> str:
        return self.body[0] if self.body else ""

    def where(self, root: Path) -> str:
        return f"{self.page.relative_to(root)}:{self.line}"


def blocks(page: Path) -> Iterator[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        fence, info = opening.group(1), opening.group(2).strip()
        end = next((i for i in range(index + 1, len(lines)) if lines[i].startswith(fence)
                    and not lines[i].strip(fence[0]).strip()), len(lines))
        marker = MARKER.match(lines[index - 1]) if index else None
        yield Block(page, index + 1, info, tuple(lines[index + 1:end]), marker.group(1) if marker else None)
        index = end + 1


def rewrite(page: Path, bodies: dict[int, list[str]]) -> None:
    """Replace the bodies of the blocks opening at the given lines, leaving every other byte of the page as it was."""
    lines = page.read_text(encoding="utf-8").splitlines(keepends=True)
    for block in sorted(blocks(page), key=lambda b: b.line, reverse=True):  # from the end: line numbers hold
        if block.line in bodies:
            lines[block.line:block.line + len(block.body)] = [f"{text}\n" for text in bodies[block.line]]
    page.write_text("".join(lines), encoding="utf-8")


# --- how a sample is made -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Command:
    args: tuple[str, ...]  # after `sendhost`
    comment: str = ""  # shown after the command line, as a reader's note (`# again: ...`)
    exit: int = 0  # the status it must exit with: anything else is a broken run, never written into a page

    @property
    def prompt(self) -> str:
        text = "$ " + shlex.join(("sendhost", *self.args))
        return f"{text}    # {self.comment}" if self.comment else text


def sendhost(*args: str, comment: str = "", exit: int = 0) -> Command:
    return Command(tuple(args), comment, exit)


class BrokenRun(Exception):
    """A sample's command exited with another status than the sample says: its output is no sample."""


@dataclass(frozen=True)
class Sample:
    world: str
    commands: tuple[Command, ...]
    # Written into the world's directory first: the text, or a function of the example inventory's text.
    files: dict[str, str | Callable[[str], str]] = field(default_factory=dict)
    prompts: bool = True  # False: the block shows the output alone (the text around it names the command)
    excerpt: Callable[[list[str]], list[str]] | None = None  # what the page leaves out, said in the page too
    # Run the page's Python block just above this one (its output is what the page says it prints), before the
    # commands: the example is then checked along with its output.
    python_above: bool = False


def _cut_out(start: str, until: str) -> Callable[[list[str]], list[str]]:
    """Leave out the lines from the first starting with `start` up to (not including) the next starting `until`."""
    def cut(lines: list[str]) -> list[str]:
        first = next(i for i, line in enumerate(lines) if line.startswith(start))
        last = next(i for i in range(first + 1, len(lines)) if lines[i].startswith(until))
        return lines[:first] + lines[last:]
    return cut


# A zone file with the mistakes docs/ci-audit.md's example shows (its line numbers are the ones the report cites).
_ZONE_WITH_MISTAKES = """\
$ORIGIN example.com.
$TTL 3600
@        IN SOA  ns1.example.com. hostmaster.example.com. 1 7200 3600 1209600 3600
@        IN NS   ns1.example.com.
@        IN MX   10 mx.example.com.
mx       IN A    192.0.2.25
@        IN TXT  "v=spf1 ip4:192.0.2.0/24 ptr ?all"
s2026._domainkey IN TXT "v=DKIM1; k=rsa; t=y; p="
_dmarc   IN TXT  "v=DMARC1; p=none"
"""

SAMPLES: dict[str, Sample] = {
    "dns-audit-zone-with-mistakes": Sample(
        "plain", (sendhost("dns", "audit", "--zone-dir", "zones", "--selector", "s2026", exit=1),),
        files={"zones/example.com.zone": _ZONE_WITH_MISTAKES}, prompts=False),
    "pool-status-no-hosts": Sample("plain", (sendhost("pool", "status"),)),
    "pool-plan-30000": Sample("plain", (sendhost("pool", "plan", "--sends-per-day", "30000", "--hosts", "4",
                                                 "--slots", "5"),)),
    "inventory-check": Sample(
        "plain", (sendhost("inventory", "check"), sendhost("inventory", "check", "typo.yml", exit=2)),
        files={"typo.yml": lambda example: example.replace("            slots: 3\n", "            slot: 3\n", 1)}),
    "python-pool-lease": Sample("plain", (), python_above=True, prompts=False),
    "simulate-bad-input": Sample("plain", (
        sendhost("simulate", "--days", "0", exit=2),
        sendhost("simulate", "--sends-per-day", "-5", exit=2),
        sendhost("simulate", "--inventory", "nope.yml", exit=2),
    )),
    "simulate-default": Sample(
        "simulation", (sendhost("simulate"),),
        excerpt=_cut_out("what the counts mean", "mailboxes, by")),
}

_SYNOPSIS = "a synopsis written for the reader, not output; synopsis_problems checks its options against the command's"

# Blocks that show output but are not generated, by page and how their first line starts, with why. Each is still
# written from a real run; keeping it true is the job of whoever changes what it shows.
NOT_GENERATED: dict[tuple[str, str], str] = {
    ("docs/postmaster.md", "$ sendhost postmaster sync"):
        "reads a real Google account's domains and days from the Postmaster Tools API (tests/sender/postmaster/"
        "test_cli_postmaster.py runs the command against a fake of it)",
    ("docs/placement.md", "placement test 7"):
        "seeds at Gmail and a provider of one's own, read after a real agent's sends: times and verdicts are theirs",
    ("docs/aws-requirements.md", "$ sendhost pool doctor sender-1 --format json"):
        "asks a real AWS account about a real subnet's routes",
    ("docs/benchmarks.md", "                                own-core    shared"):
        "benchmark timings: they differ every run, by design (bench/ prints ratios measured in the run)",
    ("docs/benchmarks.md", "ratio reserve/bare (median of rounds):"):
        "benchmark timings: they differ every run",
    ("docs/benchmarks.md", "sendhost:   200 domains in "):
        "benchmark timings, and checkdmarc installed beside sendhost",
    ("docs/benchmarks.md", "per message, a pass over "):
        "benchmark timings: they differ every run",
    ("docs/campaigns.md", "$ sendhost campaign apply campaign.example.yml"):
        "a walk through a campaign over days of a running agent: due times and Message-IDs come from the clock",
    ("docs/campaigns.md", "q1-founders: 4 follow-up(s) due since "):
        "one line of a status: a mailbox disconnected for hours while its leads' follow-ups fell due",
    ("docs/sender.md", "1 sent"):
        "a real agent's --once run: the time a mailbox's gap ends comes from the clock",
    ("docs/sender.md", "INFO sendhost.sender.activity: sent row 1 (lead L0, step 1) "):
        "a running agent's lines: source addresses, replies and times of real sends",
    ("docs/campaigns.md", "$ sendhost campaign forecast q1-founders --days 10"):
        "a forecast from the sandbox's clock: its days start today",
    ("docs/campaigns.md", "$ sendhost lead show Eve@rcpt.example"):
        "sent times and Message-IDs of a real agent's sends",
    ("docs/campaigns.md", "$ sendhost campaign pause q1-founders"):
        "part of the campaign walk-through above, in a ledger the steps before it filled",
    ("docs/campaigns.md", "$ sendhost campaign reassign q1-founders"):
        "sent and stop times of the campaign walk-through above",
    ("docs/ci-audit.md", "sendhost dns audit [DOMAIN...]"):
        _SYNOPSIS,
    ("docs/dns-audit.md", "sendhost dns audit [DOMAIN...]"):
        _SYNOPSIS,
    ("docs/feedback.md", "$ sendhost sender web "):
        "a server's first line, on a host with its key file",
    ("docs/feedback.md", "$ t=$(date +%s)"):
        "a signed request to a running web endpoint",
    ("docs/feedback.md", "$ sendhost sender inbox --once"):
        "reads a real mailbox over IMAP",
    ("docs/first-host.md", "$ sendhost sandbox up"):
        "the sandbox's servers (moto, SMTP, Redis, PostgreSQL): ports and pids differ every start, and it costs "
        "seconds a sample check should not",
    ("docs/first-host.md", "$ sendhost sandbox status"):
        "pids and ports of a running sandbox",
    ("docs/first-host.md", "$ sendhost inventory check"):
        "the rehearsal against a running sandbox (its moto AWS, addresses and send times)",
    ("docs/first-host.md", "$ printf 'lead,step"):
        "the reply rehearsed against a running sandbox (its IMAP server, row times and Message-IDs)",
    ("docs/first-host.md", "$ sendhost sandbox down"):
        "stops a running sandbox",
    ("docs/infra.md", "$ sendhost provision --inventory inventory.yml"):
        "provisions a real host over SSH",
    ("docs/infra.md", "$ sendhost host probe --listen 10.0.1.5:7070 &"):
        "verifies a real host's addresses over SSH",
    ("docs/oauth.md", "sendhost mailbox authorize ana@example.com ["):
        _SYNOPSIS,
    ("docs/oauth.md", "sendhost mailbox check ana@example.com ["):
        _SYNOPSIS,
    ("docs/oauth.md", "smtp secret ok: oauth2"):
        "logs in to a real provider's SMTP and IMAP with OAuth",
    ("docs/oncall.md", "$ sendhost sender status"):
        "a part of a status: a mailbox disconnected for hours while its leads' follow-ups fell due",
    ("docs/oncall.md", "$ sendhost pool status sender-1"):
        "a pool created in AWS: its addresses and allocation ids are AWS's",
    ("docs/oncall.md", "$ sendhost pool rotate sender-1 --slot 0 --force"):
        "rotates addresses in AWS",
    ("docs/oncall.md", "$ sendhost pool reconcile --fix"):
        "reconciles a pool in AWS after a Redis restart",
    ("docs/python-api.md", "$ sendhost pool status"):
        "the budgets are drawn at random when the Python example above registers the addresses",
    ("docs/python-api.md", "$ sendhost warmup add alice@example.com "):
        "warm-up days and times are today's: the CLI takes no clock to fix",
    ("docs/sender.md", "$ sendhost sender migrate"):
        "a ledger with leads already in it",
    ("docs/sender.md", "error: 1 send(s) could not reach their submission server"):
        "an agent's run with a row due and a mailbox's submission server",
    ("docs/sender.md", "$ sendhost sender unconfirmed --look"):
        "a real mailbox's Sent folder over IMAP",
    ("docs/simulation.md", "sendhost simulate [--inventory PATH]"):
        _SYNOPSIS,
    ("docs/state-and-embedded.md", "error: Redis at redis://10.0.3.7:6379/0 refused"):
        "a Redis server with ACL users",
    ("docs/state-and-embedded.md", "$ sendhost embedded status"):
        "pids, key counts and file sizes of running servers",
    ("docs/warmup.md", "$ sendhost warmup add dave@example.com --start 2026-12-07"):
        "days and times relative to now: the CLI takes no clock to fix",
    ("docs/warmup.md", "$ sendhost warmup reserve alice@example.com"):
        "a cooldown's time left, from the clock",
    ("docs/warmup.md", "$ sendhost warmup record "):
        "caps relative to today's date: the CLI takes no clock to fix",
}


# --- what varies from machine to machine ----------------------------------------------------------------------

def substitutions(world_dir: Path) -> list[tuple[str, str]]:
    """Each text that differs per machine or run, and the fixed text the docs show instead (applied in order)."""
    import simulation

    installed = Path(simulation.__file__).resolve().parent.parent  # where the packages are: a venv, a checkout
    return [
        # The world's directory, /tmp/sendhost-sample-<8 random characters>: its random part shown as XXXXXXXX, so
        # the text keeps its length and a table's columns stay as printed.
        (str(world_dir), re.sub(r"[^-/]+$", lambda m: "X" * len(m.group()), str(world_dir))),
        (str(installed), "…/site-packages"),  # `details: sendhost dns audit --zone-dir …` names the shipped zones
    ]


def _substitute(text: str, pairs: Sequence[tuple[str, str]]) -> str:
    for real, shown in pairs:
        text = text.replace(real, shown)
    return text


# --- running the worlds ---------------------------------------------------------------------------------------

def _prepare(world: str, directory: Path, sample: Sample) -> None:
    if world == "plain":
        shutil.copyfile(ROOT / "inventory.example.yml", directory / "inventory.yml")
    example = (ROOT / "inventory.example.yml").read_text(encoding="utf-8")
    for name, text in sample.files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text if isinstance(text, str) else text(example), encoding="utf-8")


def world_env(directory: Path) -> dict[str, str]:
    """The environment a world's commands add to the user's (less sendhost's, AWS's and Redis's own settings, as
    tests/support/cli.py leaves them out): no AWS credentials from anywhere, so a command that would ask AWS says
    it cannot, the same on every machine."""
    return {"AWS_EC2_METADATA_DISABLED": "true",  # no instance role from the metadata service
            "AWS_CONFIG_FILE": str(directory / "no-aws-config"),  # nor ~/.aws of whoever runs it
            "AWS_SHARED_CREDENTIALS_FILE": str(directory / "no-aws-credentials")}


def _python(code: str, directory: Path) -> str:
    """What a reader's `python` prints running `code` in `directory`, with this checkout's packages."""
    from tests.support.cli import cli_env

    env = cli_env({**world_env(directory), "PYTHONPATH": str(ROOT)})
    result = subprocess.run([sys.executable, "-c", code], cwd=directory, env=env, capture_output=True, text=True,
                            timeout=300, check=False)
    if result.returncode != 0:
        raise BrokenRun(f"the Python example exited {result.returncode}:\n{result.stderr}")
    return result.stdout + result.stderr


def produce(sample: Sample, python: str | None = None) -> list[str]:
    """The sample's block body, from running its commands (and `python`, the page's block above) now."""
    lines = printed(sample, python)
    return sample.excerpt(lines) if sample.excerpt else lines


def printed(sample: Sample, python: str | None = None) -> list[str]:
    """Everything the sample's commands print, substitutions made, before any excerpt is taken."""
    # tests/support/cli.py runs `sendhost ARGS` in this process with a user's environment (and in a fresh
    # interpreter with SENDHOST_TEST_CLI=process): one interpreter start for every sample, not two seconds each.
    from tests.support.cli import run_cli

    directory = Path(tempfile.mkdtemp(prefix="sendhost-sample-", dir="/tmp"))  # see substitutions()
    env = world_env(directory)
    try:
        _prepare(sample.world, directory, sample)
        pairs = substitutions(directory)
        lines: list[str] = []
        if python is not None:
            lines.extend(_substitute(_python(python, directory), pairs).rstrip("\n").splitlines())
        for command in sample.commands:
            result = run_cli(*command.args, cwd=directory, env=env, timeout=900)
            if result.returncode != command.exit:
                raise BrokenRun(f"`{command.prompt[2:]}` exited {result.returncode}, the sample expects "
                                f"{command.exit}:\n{result.stdout}{result.stderr}")
            if sample.prompts:
                lines.append(command.prompt)
            output = _substitute(result.stdout + result.stderr, pairs)
            lines.extend(output.rstrip("\n").splitlines())
        if (directory / ".sendhost").exists():  # servers the commands started outlive them: stop them
            run_cli("embedded", "stop", cwd=directory, env=env)
        return [line.rstrip() for line in lines]
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# --- synopses: written by hand, their options checked --------------------------------------------------------

def synopses(block: Block) -> list[tuple[list[str], list[str]]]:
    """A block of synopses (each line `sendhost WORDS [--option ...]`, continued on indented lines): per synopsis,
    the words naming the command and the options it names. Empty for any other block."""
    found: list[tuple[list[str], list[str]]] = []
    for line in block.body:
        if line.startswith("sendhost "):
            found.append((re.findall(r"[a-z][a-z-]*", line.split(" [", 1)[0].split(" -", 1)[0])[1:], []))
        elif not (line.startswith(" ") and found):
            return []
        found[-1][1].extend(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", line))
    return found if any("[-" in line for line in block.body) else []


def synopsis_problems(root: Path) -> list[str]:
    """Each synopsis naming an option its command does not have, or leaving out one it has."""
    import click

    from toolkit.cli import cli

    problems: list[str] = []
    for page in pages(root):
        for block in blocks(page):
            for words, named in synopses(block):
                command: click.Command = cli
                ctx = click.Context(cli, info_name="sendhost")
                path = ["sendhost"]
                for word in words:
                    sub = command.get_command(ctx, word) if isinstance(command, click.Group) else None
                    if sub is None:
                        break
                    command, path = sub, [*path, word]
                options = {opt for param in command.params if isinstance(param, click.Option)
                           for opt in (*param.opts, *param.secondary_opts) if opt.startswith("--")} - {"--help"}
                name = " ".join(path)
                problems += [f"{block.where(root)}: the synopsis of `{name}` names {opt}, which it does not have"
                             for opt in sorted(set(named) - options)]
                problems += [f"{block.where(root)}: the synopsis of `{name}` leaves out {opt}"
                             for opt in sorted(options - set(named))]
    return problems


# --- checking and writing -------------------------------------------------------------------------------------

@dataclass
class Report:
    stale: list[str] = field(default_factory=list)  # each with its diff
    problems: list[str] = field(default_factory=list)  # unknown IDs, unaccounted blocks, stale list entries

    @property
    def ok(self) -> bool:
        return not self.stale and not self.problems


def unaccounted(root: Path) -> list[str]:
    """Output-looking blocks neither marked nor in NOT_GENERATED, and NOT_GENERATED entries naming no block."""
    found: list[str] = []
    unmatched = set(NOT_GENERATED)
    for page in pages(root):
        name = str(page.relative_to(root))
        for block in blocks(page):
            listed = {key for key in NOT_GENERATED if key[0] == name and block.first_line.startswith(key[1])}
            unmatched -= listed
            if block.sample_id is None and block.info in OUTPUT_INFO and not listed:
                found.append(f"{block.where(root)}: a block that looks like output ({block.first_line[:60]!r}) is "
                             "neither marked `<!-- sample: ID -->` nor in NOT_GENERATED (tools/docs_samples.py)")
    found += [f"{page}: NOT_GENERATED lists a block starting {line!r} that the page no longer has"
              for page, line in sorted(unmatched)]
    return found


def run(root: Path, worlds: Sequence[str] = WORLDS, write: bool = False, only: Collection[str] = (),
        out: Callable[[str], None] = print) -> Report:
    """Check (or with `write`, rewrite) the marked samples of the worlds named, or only the IDs in `only`."""
    report = Report(problems=unaccounted(root) + synopsis_problems(root))
    made: dict[str, list[str]] = {}
    for page in pages(root):
        bodies: dict[int, list[str]] = {}
        page_blocks = list(blocks(page))
        for above, block in zip([None, *page_blocks], page_blocks, strict=False):
            if block.sample_id is None:
                continue
            sample = SAMPLES.get(block.sample_id)
            if sample is None:
                report.problems.append(f"{block.where(root)}: sample {block.sample_id!r} is not in SAMPLES")
                continue
            if sample.world not in worlds or (only and block.sample_id not in only):
                continue
            python = None
            if sample.python_above:
                if above is None or above.info != "python":
                    report.problems.append(f"{block.where(root)}: sample {block.sample_id} runs the Python block "
                                           "above it, and the page has none there")
                    continue
                python = "\n".join(above.body)
            if block.sample_id not in made:
                made[block.sample_id] = produce(sample, python)
            fresh = made[block.sample_id]
            if list(block.body) == fresh:
                continue
            bodies[block.line] = fresh
            diff = "\n".join(difflib.unified_diff(list(block.body), fresh, "in the page", "printed now", lineterm=""))
            report.stale.append(f"{block.where(root)}: sample {block.sample_id} is stale\n{diff}")
        if write and bodies:
            rewrite(page, bodies)
            out(f"{page.relative_to(root)}: rewrote {len(bodies)} sample(s)")
    for text in report.stale if not write else ():
        out(text)
    for text in report.problems:
        out(text)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="regenerate every marked block in place")
    action.add_argument("--check", action="store_true", help="exit 1 naming each stale sample, with a diff")
    parser.add_argument("--world", choices=WORLDS, action="append", help="only the samples of this world")
    parser.add_argument("--only", action="append", metavar="ID", help="only this sample (repeatable)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the tree whose README.md and docs/ to read")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if not (root / "README.md").is_file():
        parser.error(f"--root {args.root}: no README.md there")
    unknown = sorted(set(args.only or ()) - set(SAMPLES))
    if unknown:
        parser.error(f"--only {unknown[0]}: no such sample; SAMPLES has {', '.join(sorted(SAMPLES))}")
    try:
        report = run(root, tuple(args.world or WORLDS), write=args.write, only=args.only or ())
    except BrokenRun as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.write:
        return 1 if report.problems else 0
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # `python tools/docs_samples.py`: the checkout's packages and tests.support
    sys.exit(main())
