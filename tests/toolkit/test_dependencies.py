"""Dependencies: a Redis client that checks TLS host names, and pins that make and CI install with."""

from __future__ import annotations

import os
import subprocess
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.conftest import REPO_ROOT

CONSTRAINTS = REPO_ROOT / "constraints.txt"


def _requirements() -> list[Requirement]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    listed = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        listed += extra
    return [Requirement(text) for text in listed if not text.startswith("sendhost[")]


def _pins() -> dict[str, Version]:
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, separator, pinned = line.partition("==")
            assert separator and pinned, f"constraints.txt pins exact versions: {line!r}"
            pins[canonicalize_name(name)] = Version(pinned)
    return pins


def test_the_redis_client_is_one_that_checks_host_names_on_rediss() -> None:
    redis = next(r for r in _requirements() if r.name == "redis")
    assert not redis.specifier.contains("5.9.9") and redis.specifier.contains("6.0.0")
    assert Version(version("redis")) >= Version("6")


def test_every_dependency_is_pinned_within_what_pyproject_allows() -> None:
    pins = _pins()
    for requirement in _requirements():
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not pinned: run `make constraints`"
        assert requirement.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} vs {requirement}"
    assert "sendhost" not in pins, "the project itself is never pinned"


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    return subprocess.run(["make", *args], cwd=REPO_ROOT, capture_output=True, text=True, env=env, check=False,
                          timeout=120)


@pytest.mark.service
def test_the_venv_bootstrap_installs_with_the_constraints(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    planned = _make("-n", "-B", f"VENV={venv}", f"{venv}/.installed")
    assert planned.returncode == 0, planned.stderr
    install = [line for line in planned.stdout.splitlines() if "pip install" in line and "-e" in line]
    assert install == [f"{venv}/bin/python -m pip install --quiet -c constraints.txt -e '.[dev]'"]


@pytest.mark.service
def test_check_constraints_fails_on_an_installed_package_that_is_not_pinned(tmp_path: Path) -> None:
    partial = tmp_path / "constraints.txt"
    partial.write_text("\n".join(line for line in CONSTRAINTS.read_text().splitlines()
                                 if not line.lower().startswith("redis==")) + "\n")
    # -o: treat the venv as up to date, so the edited constraints file does not trigger a reinstall
    result = _make("-o", ".venv/.installed", "check-constraints", f"CONSTRAINTS={partial}")
    assert result.returncode != 0
    assert f"redis=={version('redis')}" in result.stdout
    assert f"installed but not pinned in {partial}: run 'make constraints'" in result.stderr
    assert _make("-o", ".venv/.installed", "check-constraints").returncode == 0
