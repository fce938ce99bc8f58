"""The `sendhost` entry point: help, version, exit codes. As real processes (`python -m toolkit`): the entry point,
its exit statuses and its import cost are what these prove."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli_process
from toolkit import __version__
from toolkit.cli import GROUPS

pytestmark = pytest.mark.service  # real processes, each one


def test_help_lists_only_working_groups_and_exit_codes() -> None:
    result = run_cli_process("--help")
    assert result.returncode == 0
    for name in GROUPS:
        assert f"  {name} " in result.stdout
    assert "2  usage or configuration error" in result.stdout


def test_version() -> None:
    result = run_cli_process("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"sendhost, version {__version__}"


def test_unknown_command_is_a_usage_error() -> None:
    result = run_cli_process("frobnicate")
    assert result.returncode == 2
    assert "No such command 'frobnicate'" in result.stderr


def test_missing_inventory_file_exits_2_naming_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    result = run_cli_process("--inventory", str(tmp_path / "nope.yml"), "inventory", "check")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"error: {tmp_path / 'nope.yml'}: no such file; pass --inventory PATH or copy inventory.example.yml"
    )


def test_help_imports_no_heavy_clients() -> None:
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    code = ("import sys; from toolkit.cli import cli; "
            "print(any(m.startswith(('boto3', 'redis', 'ansible')) for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(REPO_ROOT)}).stdout.strip()
    assert out == "False"
