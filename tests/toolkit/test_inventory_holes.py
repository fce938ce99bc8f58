"""Inventory mistakes that used to slip through or crash: each is exit 2 with file:line, the key and the fix.

The last test mutates the example inventory the way a hurried edit does (a value replaced, a line dropped or
doubled) and holds that loading it either works or raises ConfigError: never another exception, which the CLI
would report as "internal error" with exit 1.
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sendhost.errors import ConfigError
from tests.conftest import REPO_ROOT, run_cli
from tests.toolkit.test_inventory_host_values import strings_of
from toolkit.cli import main as cli_main
from toolkit.inventory import load_inventory

EXAMPLE = (REPO_ROOT / "inventory.example.yml").read_text()


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "inventory.yml"
    path.write_text(text)
    return path


def line_of(text: str, fragment: str, occurrence: int = 1) -> int:
    """The 1-based line of the `occurrence`-th line containing `fragment`."""
    hits = [number for number, line in enumerate(text.splitlines(), 1) if fragment in line]
    return hits[occurrence - 1]


def test_mailbox_address_in_another_domain_is_an_error_at_its_domain_line(tmp_path: Path) -> None:
    text = EXAMPLE.replace("address: carol@example.org", "address: carol@example.com", 1)
    with pytest.raises(ConfigError) as caught:
        load_inventory(write(tmp_path, text))
    line = line_of(text, " domain: example.org")
    assert str(caught.value) == (
        f"{tmp_path / 'inventory.yml'}:{line}: sendhost_mailboxes[2].domain: mailbox carol@example.com is in "
        "domain example.com, not example.org; set domain: example.com or fix the address"
    )


def test_mailbox_domain_comparison_ignores_case_and_idna_form(tmp_path: Path) -> None:
    text = EXAMPLE.replace("address: carol@example.org", "address: Carol@EXAMPLE.org", 1)
    assert load_inventory(write(tmp_path, text)).mailboxes[2].address == "carol@example.org"


def test_primary_ip_shared_by_two_hosts_names_the_primary_ip_key_and_line(tmp_path: Path) -> None:
    text = EXAMPLE.replace("sendhost_primary_ip: 10.0.2.10", "sendhost_primary_ip: 10.0.1.10", 1)
    with pytest.raises(ConfigError) as caught:
        load_inventory(write(tmp_path, text))
    line = line_of(text, "sendhost_primary_ip: 10.0.1.10", 2)
    assert str(caught.value).startswith(
        f"{tmp_path / 'inventory.yml'}:{line}: sender-2.sendhost_primary_ip: primary IP 10.0.1.10 is already used "
        "by sender-1 (primary IP)"
    )


def test_slot_address_equal_to_another_hosts_primary_names_the_private_ips_line(tmp_path: Path) -> None:
    text = EXAMPLE.replace("ptr_zone: example.com", "ptr_zone: example.com\n            private_ips: "
                           "[10.0.1.10, 10.0.2.20, 10.0.2.21]", 1)
    with pytest.raises(ConfigError) as caught:
        load_inventory(write(tmp_path, text))
    line = line_of(text, "private_ips: [10.0.1.10")
    assert f"inventory.yml:{line}: sender-2.sendhost_pool.private_ips: slot address 10.0.1.10" in str(caught.value)


def test_no_senders_group_names_the_all_line(tmp_path: Path) -> None:
    text = EXAMPLE.split("  children:")[0]
    with pytest.raises(ConfigError) as caught:
        load_inventory(write(tmp_path, text))
    assert str(caught.value).startswith(f"{tmp_path / 'inventory.yml'}:{line_of(text, 'all:')}: senders: no group")


def test_no_senders_and_no_vars_still_names_a_real_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"inventory.yml:1: senders: no group 'senders'"):
        load_inventory(write(tmp_path, "all:\n  hosts:\n    web-1:\n"))


@pytest.mark.parametrize(("old", "new"), [
    ('start: "2026-11-16"', "start: 2026-02-30"),
    ("ansible_user: ubuntu", "ansible_user: 2026-02-30"),
    ("park_minutes: 15                   #", "park_minutes: 2026-13-01 10:00:00 #"),
], ids=["mailbox-start", "ansible-var", "datetime"])
def test_unquoted_impossible_date_anywhere_is_exit_2_with_file_line(tmp_path: Path, old: str, new: str) -> None:
    text = EXAMPLE.replace(old, new, 1)
    path = write(tmp_path, text)
    result = run_cli("inventory", "check", "--offline", str(path))
    assert result.returncode == 2, result.stderr
    value = new.split(": ", 1)[1].split(" #")[0].strip()
    assert result.stderr == (
        f"error: {path}:{line_of(text, new)}: {value!r} is not a real date or time "
        f"({'month must be in 1..12' if '-13-' in value else 'day is out of range for month'}); "
        f'fix it, or quote it ("{value}") if it is meant as text\n'
    )


def test_unquoted_real_date_still_loads(tmp_path: Path) -> None:
    text = EXAMPLE.replace('start: "2026-11-16"', "start: 2026-11-16", 1)
    assert load_inventory(write(tmp_path, text)).mailboxes[0].start == date(2026, 11, 16)


def test_a_list_item_that_is_not_a_mapping_names_its_line(tmp_path: Path) -> None:
    text = EXAMPLE.replace("      - address: alice@example.com\n",
                           "      - alice@example.com\n      - address: a@example.com\n", 1)
    with pytest.raises(ConfigError) as caught:
        load_inventory(write(tmp_path, text))
    assert str(caught.value) == (
        f"{tmp_path / 'inventory.yml'}:{line_of(text, '- alice@example.com')}: sendhost_mailboxes[0]: expected a "
        "mapping of keys (like `- name: ...`), got text 'alice@example.com'"
    )


def test_vars_that_are_not_a_mapping_name_their_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_inventory(write(tmp_path, "all:\n  vars: [1]\n"))
    assert str(caught.value) == f"{tmp_path / 'inventory.yml'}:2: all.vars: expected a mapping, got a list"


HOSTILE_VALUES = [
    "2026-02-30", "2026-13-01", "2026-02-30 25:61:00", "0000-00-00", "", "~", "null", "[]", "{}", "[a, b]",
    "{a: 1}", "-1", "0", "99999999999999999999999", "1e999", ".nan", "yes", "'\\x00'", '"\\u0000"', '"a\\nb"',
    '"\\t"', "!!int x", "!!float x", "!!binary x", "!!timestamp 2026-02-30", "!vault x", "&a x", "*a", "'",
    '"', "[", "{", "é", "a" * 300, "10.0.1.999", "::1", "i-0", "us-east-1", "@", "a@b", "x:y", "- a", "? a",
    "| ", "> ", "%", "`", "#", "!!python/object:os.system x",
]


def _mutate(text: str, line_index: int, kind: str, value: str) -> str:
    lines = text.splitlines()
    index = line_index % len(lines)
    line = lines[index]
    if kind == "drop":
        del lines[index]
    elif kind == "double":
        lines.insert(index, line)
    elif kind == "whole":
        lines[index] = line[: len(line) - len(line.lstrip())] + value
    elif ": " in line:
        key, _ = line.split(": ", 1)
        lines[index] = f"{key}: {value}"
    elif line.lstrip().startswith("- "):
        lines[index] = line[: len(line) - len(line.lstrip())] + f"- {value}"
    else:
        lines[index] = line + value
    return "\n".join(lines) + "\n"


@settings(max_examples=500, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line_index=st.integers(min_value=0, max_value=10_000),
       kind=st.sampled_from(["replace", "replace", "replace", "whole", "drop", "double"]),
       value=st.sampled_from(HOSTILE_VALUES) | st.text(max_size=12))
def test_a_mutated_example_inventory_checks_with_exit_0_or_2_and_file_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], line_index: int, kind: str, value: str) -> None:
    text = _mutate(EXAMPLE, line_index, kind, value)
    path = tmp_path / "inventory.yml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    capsys.readouterr()
    # `sendhost inventory check` through the CLI's own entry point (in-process: thousands of subprocesses would
    # take minutes); its exit code mapping is the one a user meets.
    with pytest.raises(SystemExit) as exited:
        cli_main(["inventory", "check", "--offline", "--format", "json", str(path)])
    stderr = capsys.readouterr().err
    assert exited.value.code in (0, 2), stderr
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    if exited.value.code == 2:
        assert re.fullmatch(rf"error: {re.escape(str(path))}:[1-9]\d*: [^\n]+\n", stderr), stderr
    else:
        # What loads is fit to be written into files on the sender hosts.
        inventory = load_inventory(path)
        assert not [s for s in strings_of(inventory) if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in s)]
