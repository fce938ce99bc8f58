"""The mutation catalogue (tools/mutate.py) cannot rot silently: each original text is still in its file, once, and
each test it names still exists. The mutation runs themselves are `tools/mutate.py`, run by hand."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tools import mutate
from tools.mutate import CATALOGUE, Mutation

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("mutation", CATALOGUE, ids=[m.name for m in CATALOGUE])
def test_each_original_text_occurs_once_in_its_file(mutation: Mutation) -> None:
    text = (ROOT / mutation.path).read_text(encoding="utf-8")
    assert text.count(mutation.original) == 1, f"{mutation.name}: update its original text in tools/mutate.py"
    assert mutation.replacement != mutation.original


@pytest.mark.parametrize("mutation", CATALOGUE, ids=[m.name for m in CATALOGUE])
def test_each_named_test_exists(mutation: Mutation) -> None:
    assert mutation.tests and mutation.description
    for node in mutation.tests:
        path, _, name = node.partition("::")
        function = name.split("[", 1)[0]
        assert re.search(rf"^def {re.escape(function)}\(", (ROOT / path).read_text(encoding="utf-8"), re.M), node


def test_names_are_unique() -> None:
    names = [m.name for m in CATALOGUE]
    assert len(names) == len(set(names))
    assert len(mutate.ISSUE_31) == 9


def test_a_mutation_is_undone_however_its_block_ends(tmp_path: Path) -> None:
    target = tmp_path / "rule.sql"
    target.write_bytes(b"WHERE a >= 4\r\nAND b\n")
    mutation = Mutation("m", "rule.sql", ">= 4", ">= 5", ("t",), "d")
    with pytest.raises(KeyboardInterrupt), mutate.mutated(tmp_path, mutation):
        assert target.read_bytes() == b"WHERE a >= 5\r\nAND b\n"
        raise KeyboardInterrupt
    assert target.read_bytes() == b"WHERE a >= 4\r\nAND b\n"
    twice = Mutation("m", "rule.sql", "E", "e", ("t",), "d")
    with pytest.raises(ValueError, match="occurs 2 times"), mutate.mutated(tmp_path, twice):
        pass


@pytest.mark.service  # runs git to list the tree
def test_the_copy_is_the_working_tree_without_ignored_files(tmp_path: Path) -> None:
    mutate.copy_tree(ROOT, tmp_path)
    for mutation in CATALOGUE:
        assert (tmp_path / mutation.path).read_bytes() == (ROOT / mutation.path).read_bytes()
    assert (tmp_path / "provisioning" / "playbooks").is_symlink()
    assert not (tmp_path / ".venv").exists() and not (tmp_path / ".git").exists()
