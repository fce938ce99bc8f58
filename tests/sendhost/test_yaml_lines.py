"""The one YAML loader: what any file costs to read is bounded (aliases, nesting, size), whoever wrote the file."""

from __future__ import annotations

import re
import time
import tracemalloc
from pathlib import Path

import pytest

from sendhost.errors import ConfigError
from sendhost.yaml_lines import MAX_ALIASED_VALUES, MAX_FILE_BYTES, MAX_NESTING, load_yaml_with_lines

LAUGHS = "".join(
    f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]\n"
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True)
)
# 9 ** 9 values (387 million) in fewer than 400 bytes.
BILLION_LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + LAUGHS


def refused(tmp_path: Path, text: str) -> str:
    path = tmp_path / "file.yml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_yaml_with_lines(path)
    assert raised.value.exit_code == 2
    return str(raised.value).removeprefix(f"{path}:")


def test_nested_aliases_that_multiply_values_are_refused_at_the_alias_that_passes_the_bound(tmp_path: Path) -> None:
    assert len(BILLION_LAUGHS.encode()) < 412
    message = refused(tmp_path, BILLION_LAUGHS)
    # Line 6 (`f:`) is the first whose aliases stand for more than the bound: 9 ** 5 = 59,049 values by line 5,
    # 9 ** 6 by line 6.
    assert message == (f"6: the aliases in this file stand for more than {MAX_ALIASED_VALUES:,} values; write the "
                       "repeated settings out, or alias whole blocks fewer times")


def test_the_412_byte_alias_bomb_is_refused_at_its_line_in_under_a_second_and_50_mb(tmp_path: Path) -> None:
    """Issue 40's size: a 412-byte file whose aliases, one of them a key (written out whole as its text), raised
    MemoryError. Refused, exit 2, at the line where it passes the bound, its whole cost bounded."""
    bomb = BILLION_LAUGHS + "? *i\n: boom\n"
    bomb += "#" * (411 - len(bomb.encode())) + "\n"
    assert len(bomb.encode()) == 412
    tracemalloc.start()
    started = time.perf_counter()
    try:
        message = refused(tmp_path, bomb)
        elapsed = time.perf_counter() - started
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert message.startswith("6: the aliases in this file stand for more than"), message
    assert elapsed < 1.0 and peak < 50 * 2**20, (elapsed, peak)


def test_an_alias_used_as_a_key_is_bounded_too(tmp_path: Path) -> None:
    # A key that is a list is turned into its text, which on the unbounded loader wrote out every value it stood for.
    # Through line 5 the aliases stand for 74,718 values; the key's one alias of `e` (66,430) passes the bound.
    assert refused(tmp_path, BILLION_LAUGHS.split("f:")[0] + "? *e\n: boom\n").startswith("6: the aliases")


def test_anchors_that_share_settings_still_load_as_ansible_inventories_use_them(tmp_path: Path) -> None:
    path = tmp_path / "inventory.yml"
    mailboxes = "".join(f"    - {{address: m{n}@example.com, smtp: *smtp}}\n" for n in range(500))
    path.write_text("smtp: &smtp {host: smtp.example.com, port: 587, security: starttls}\nmailboxes:\n" + mailboxes,
                    encoding="utf-8")
    data = load_yaml_with_lines(path)
    assert len(data["mailboxes"]) == 500
    assert data["mailboxes"][499]["smtp"] == {"host": "smtp.example.com", "port": 587, "security": "starttls"}
    assert data["mailboxes"][499].key_lines["address"] == 502


def test_an_alias_to_a_value_that_contains_it_is_refused(tmp_path: Path) -> None:
    assert refused(tmp_path, "a: &loop\n  - x\n  - *loop\n") == \
        "3: an alias refers to a value that contains it; write the value out instead"


def test_values_nested_past_the_bound_are_refused_at_their_line(tmp_path: Path) -> None:
    deep = "x: " + "[" * (MAX_NESTING + 10) + "]" * (MAX_NESTING + 10) + "\n"
    assert refused(tmp_path, deep).startswith(f"1: values nested more than {MAX_NESTING} levels deep")
    fits = "x: " + "[" * (MAX_NESTING - 2) + "]" * (MAX_NESTING - 2) + "\n"
    (tmp_path / "fits.yml").write_text(fits, encoding="utf-8")
    assert load_yaml_with_lines(tmp_path / "fits.yml")["x"] is not None


def test_a_file_larger_than_the_bound_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "huge.yml"
    with path.open("wb") as file:
        file.truncate(50 * MAX_FILE_BYTES)  # sparse: 400 MiB that costs no disk, and would cost memory to read
    with pytest.raises(ConfigError, match=re.escape(f"{path}: larger than {MAX_FILE_BYTES:,} bytes")):
        load_yaml_with_lines(path)
    with pytest.raises(ConfigError, match="larger than"):
        load_yaml_with_lines(path, text="x: " + "y" * MAX_FILE_BYTES)


def test_a_file_just_inside_the_size_bound_loads(tmp_path: Path) -> None:
    path = tmp_path / "big.yml"
    path.write_text("x: " + "y" * (MAX_FILE_BYTES - 4) + "\n", encoding="utf-8")
    assert len(load_yaml_with_lines(path)["x"]) == MAX_FILE_BYTES - 4
