"""tests/support/shared.py: what one pytest-xdist worker makes for the run, the others use instead of making it."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from tests.support.shared import made_once


def _make(folder: Path) -> Path:
    (folder / "count").write_text(str(int((folder / "count").read_text()) + 1 if (folder / "count").exists() else 1))
    made = folder / "thing.txt"
    made.write_text("made")
    return made


def _ask(args: tuple[str, str]) -> str:
    """In another process, as a worker would: the same run's temporary directory, this worker's name."""
    basetemp, worker = args
    import os

    os.environ["PYTEST_XDIST_WORKER"] = worker

    class Factory:
        def getbasetemp(self) -> Path:
            return Path(basetemp) / f"popen-{worker}"

    return str(made_once(Factory(), "thing", _make))  # type: ignore[arg-type]


@pytest.mark.service  # worker processes of its own
def test_workers_of_one_run_make_a_thing_once_and_all_get_its_path(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    with multiprocessing.get_context("spawn").Pool(4) as workers:
        answers = workers.map(_ask, [(str(tmp_path), f"gw{n}") for n in range(8)])
    assert set(answers) == {str(tmp_path / "thing" / "thing.txt")}
    assert (tmp_path / "thing" / "count").read_text() == "1"


def test_a_serial_session_makes_it_in_its_own_temporary_directory(tmp_path_factory: pytest.TempPathFactory,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    first = made_once(tmp_path_factory, "serial-thing", _make)
    assert made_once(tmp_path_factory, "serial-thing", _make) == first
    assert first.parent.parent == tmp_path_factory.getbasetemp()
    assert (first.parent / "count").read_text() == "1"
