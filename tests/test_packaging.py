"""A plain `pip install sendhost` (not the editable install `make` does) must work: every file the packages read
at run time (Lua scripts, playbooks and their templates, report pages, the example zones) ships in the wheel."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow


def package_files() -> set[str]:
    """Every file under the project's packages, as paths relative to the repository (the wheel's layout)."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    packages = [pattern.rstrip("*") for pattern in project["tool"]["setuptools"]["packages"]["find"]["include"]]
    files = {path.relative_to(REPO_ROOT).as_posix() for package in packages for path in (REPO_ROOT / package).rglob("*")
             if path.is_file() and "__pycache__" not in path.parts}
    # The top-level playbooks/ ship inside the provisioning package (provisioning/playbooks links to them).
    return files | {f"provisioning/{path.relative_to(REPO_ROOT).as_posix()}"
                    for path in (REPO_ROOT / "playbooks").rglob("*") if path.is_file()}


def test_the_playbooks_live_at_the_top_of_the_checkout_and_the_package_links_to_them() -> None:
    assert (REPO_ROOT / "playbooks" / "site.yml").is_file()
    link = REPO_ROOT / "provisioning" / "playbooks"
    assert link.is_symlink() and link.resolve() == (REPO_ROOT / "playbooks").resolve()


def test_the_wheel_ships_every_file_of_every_package(tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(REPO_ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".sendhost", "__pycache__", ".*cache", "build", "dist", "*.egg-info", "tests", "bench"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                            "--wheel-dir", str(tmp_path / "dist"), str(source)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "dist").glob("sendhost-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    expected = package_files()
    assert "provisioning/playbooks/site.yml" in expected and "ippool/lua/lease.lua" in expected
    assert sorted(expected - shipped) == []
