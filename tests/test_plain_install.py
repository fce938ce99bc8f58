"""A plain `pip install sendhost` (no extras, a fresh venv) runs every command, the main job first: `sendhost simulate`
runs AWS in moto, so moto is a runtime dependency, not only a test one."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow


def test_a_plain_install_without_extras_runs_the_simulation(tmp_path: Path) -> None:
    # A copy of the checkout without what the wheel must not need (tests, benches, caches, the dev venv).
    source = tmp_path / "source"
    shutil.copytree(REPO_ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".sendhost", "__pycache__", ".*cache", "build", "dist", "*.egg-info", "tests", "bench"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    # The fresh venv's own pip builds the wheel (setuptools from the index or pip's cache), then installs it alone:
    # its dependencies come from the package index, no extras.
    built = subprocess.run([*pip, "wheel", "--no-deps", "--quiet", "--wheel-dir", str(tmp_path / "dist"),
                            str(source)], capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = (tmp_path / "dist").glob("sendhost-*.whl")
    installed = subprocess.run([*pip, "install", "--quiet", str(wheel)], capture_output=True, text=True, timeout=900)
    assert installed.returncode == 0, installed.stderr[-3000:]
    work = tmp_path / "work"  # no inventory here: the simulation runs the example shipped in the package
    work.mkdir()
    ran = subprocess.run([str(venv / "bin" / "sendhost"), "simulate", "--days", "1"], cwd=work,
                         env={"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)},
                         capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert "internal error" not in ran.stderr and "ModuleNotFoundError" not in ran.stderr
    # The sandbox alone needs an extra (moto's server mode, flask): without it, one line naming the install.
    sandbox = subprocess.run([str(venv / "bin" / "sendhost"), "sandbox", "up"], cwd=work,
                             env={"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)},
                             capture_output=True, text=True, timeout=120)
    assert sandbox.returncode == 2, sandbox.stdout + sandbox.stderr
    assert "pip install 'sendhost[sandbox]'" in sandbox.stderr and "Traceback" not in sandbox.stderr
    assert not (work / ".sendhost" / "sandbox").exists()
