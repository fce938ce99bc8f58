"""How long `sendhost simulate` takes, this tree against a baseline commit, measured in the same run.

    python -m bench.simulate [--baseline REV] [--rounds R] [--runs default,fleet10] [--keep]

Each run is a whole `sendhost simulate` (the example inventory, seed 1) in a process of its own, timed for wall
clock, CPU (user + system of the process and its children: the embedded PostgreSQL and Redis work for it) and peak
memory (its largest resident process). The baseline is REV checked out with `git worktree` into a temporary folder
and run with the same interpreter and packages (PYTHONPATH puts its tree first), so only the code differs. The two
trees' runs alternate over R rounds, which spreads the machine's other load over both; each figure is the median of
its rounds and each ratio is this tree's over the baseline's (below 1: faster). The runs:

  default    `make demo`'s run: 14 days, 3 mailboxes on the example's hosts
  fleet10    --hosts 10 --mailboxes 80 --days 7
  fleet50    --hosts 50 --mailboxes 400 --days 14 (issue 45's bar: at most 120 s wall, under 1 GB)
  fleet200   --hosts 200 --mailboxes 2000 --days 7 (issue 45's bar: at most 10 minutes), on the example inventory
             with 8 more domains: a domain carries at most 250 mailboxes, so the example's two carry 500

It also checks that both trees print the same summary (as JSON; it holds no timings): a speed-up must not change
the run. The machine's load average is printed with the figures, since both sides share it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import median

REPO = Path(__file__).resolve().parent.parent
RUNS: dict[str, list[str]] = {
    "default": [],
    "fleet10": ["--hosts", "10", "--mailboxes", "80", "--days", "7"],
    "fleet50": ["--hosts", "50", "--mailboxes", "400", "--days", "14"],
    "fleet200": ["--hosts", "200", "--mailboxes", "2000", "--days", "7"],
}
EXTRA_DOMAINS = {"fleet200": 8}  # run -> domains added to the example inventory (`simulate` allows 250 mailboxes each)


@dataclass(frozen=True)
class Timing:
    wall_s: float
    cpu_s: float
    peak_mb: float
    summary: object


def become_subreaper() -> None:
    """Orphans of our runs (the embedded PostgreSQL, which pg_ctl detaches) become our children, so their CPU is
    counted when they are reaped, as the run's own."""
    import ctypes

    pr_set_child_subreaper = 36  # <linux/prctl.h>
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1, 0, 0, 0)


def with_domains(inventory: Path, extra: int, folder: Path) -> Path:
    """`inventory` with `extra` more sending domains (fleetN.example) after its last, written into `folder`."""
    text = inventory.read_text()
    anchor = "    sendhost_mailboxes:"
    domains = "".join(f"      - name: fleet{n}.example\n        dkim_selectors: [s1]\n"
                      f"        envelope_domain: fleet{n}.example\n" for n in range(1, extra + 1))
    written = folder / "inventory.yml"
    written.write_text(text.replace(anchor, domains + "\n" + anchor, 1))
    return written


def timed(tree: Path, args: list[str], extra_domains: int = 0) -> Timing:
    """One `sendhost simulate` from `tree` in a fresh working folder: wall clock; CPU of it and every process it
    started (RUSAGE_CHILDREN before and after, once all are reaped); the peak resident memory of its process."""
    import resource

    env = {**os.environ, "PYTHONPATH": str(tree)}
    with tempfile.TemporaryDirectory(prefix="bench-simulate-") as workdir:
        inventory = tree / "inventory.example.yml"
        if extra_domains:
            inventory = with_domains(inventory, extra_domains, Path(workdir))
        command = [sys.executable, "-m", "toolkit", "--inventory", str(inventory), "simulate", *args, "--format",
                   "json"]
        out, err = Path(workdir) / "stdout", Path(workdir) / "stderr"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        with out.open("wb") as stdout, err.open("wb") as stderr:
            process = subprocess.Popen(command, cwd=workdir, env=env, stdout=stdout, stderr=stderr)
            _pid, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        _reap_orphans()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if process.returncode != 0:
            raise SystemExit(f"{tree}: simulate {' '.join(args)} exited {process.returncode}:\n"
                             f"{err.read_text(errors='replace')[-2000:]}")
        summary = json.loads(out.read_text())
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timing(wall, cpu, usage.ru_maxrss / 1024, summary)


def _reap_orphans(timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # none left
        if pid == 0:
            time.sleep(0.05)


def baseline_tree(rev: str, folder: Path) -> Path:
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(folder), rev], check=True)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default="HEAD", help="the commit to compare with (default: the last commit)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", default="default,fleet10", help=f"comma-separated, of {', '.join(RUNS)}")
    args = parser.parse_args()
    runs = args.runs.split(",")
    if unknown := [name for name in runs if name not in RUNS]:
        parser.error(f"--runs: unknown {', '.join(unknown)}; choose from {', '.join(RUNS)}")
    become_subreaper()
    folder = Path(tempfile.mkdtemp(prefix="bench-baseline-"))
    base = baseline_tree(args.baseline, folder / "tree")
    try:
        print(f"baseline {args.baseline} against {REPO} ({args.rounds} rounds); load {os.getloadavg()}", flush=True)
        for name in runs:
            figures: dict[str, list[Timing]] = {"baseline": [], "this": []}
            for _round in range(args.rounds):
                for side, tree in (("baseline", base), ("this", REPO)):
                    figures[side].append(timed(tree, RUNS[name], EXTRA_DOMAINS.get(name, 0)))
            base_summary, this_summary = figures["baseline"][0].summary, figures["this"][0].summary
            assert isinstance(base_summary, dict) and isinstance(this_summary, dict)
            differ = sorted(k for k in base_summary.keys() | this_summary.keys()
                            if base_summary.get(k) != this_summary.get(k))
            line = [f"{name}:"]
            for measure in ("wall_s", "cpu_s", "peak_mb"):
                base_value = median(getattr(t, measure) for t in figures["baseline"])
                this_value = median(getattr(t, measure) for t in figures["this"])
                line.append(f"{measure} {base_value:.1f} -> {this_value:.1f} ({this_value / base_value:.2f}x)")
            line.append("same summary" if not differ else f"SUMMARY DIFFERS in {', '.join(differ)}")
            print("  ".join(line), f"load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)], check=False)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
