"""tests/ mirrors the shipped packages (tests/README.md): each module's tests are in a test module of its name in
its package's mirror, or the README's list says where they are; and the list names only files that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("sendhost", "toolkit", "ippool", "warmup", "dns_audit", "provisioning", "simulation", "sender",
            "rehearsal")
LISTED = re.compile(r"^- `(?P<module>[^`]+)`: (?P<tests>.+)$")


def _shipped() -> list[Path]:
    return sorted(path.relative_to(ROOT) for package in PACKAGES for path in (ROOT / package).rglob("*.py")
                  if path.name != "__init__.py")


def _test_modules() -> list[Path]:
    return sorted(path.relative_to(ROOT) for path in (ROOT / "tests").rglob("test_*.py"))


def _mirror(module: Path) -> Path:
    return Path("tests", *module.parent.parts, f"test_{module.name}")


def _listed() -> dict[Path, list[Path]]:
    text = (ROOT / "tests" / "README.md").read_text()
    block = text.split("<!-- tested-elsewhere -->", 1)[1].split("<!-- /tested-elsewhere -->", 1)[0]
    listed: dict[Path, list[Path]] = {}
    for line in block.strip().splitlines():
        match = LISTED.match(line)
        assert match, f"tests/README.md: not a '- `module`: tests' line: {line!r}"
        listed[Path(match["module"])] = [Path(name.strip()) for name in match["tests"].split(",")]
    return listed


def test_every_shipped_module_has_a_test_module_of_its_name_or_a_line_saying_where_it_is_tested() -> None:
    listed = _listed()
    unplaced = [str(module) for module in _shipped()
                if not (ROOT / _mirror(module)).exists() and module not in listed]
    assert unplaced == [], ("add tests/<package>/test_<module>.py, or a line to tests/README.md's list: "
                            + ", ".join(unplaced))


def test_the_list_names_only_shipped_modules_without_a_mirror_and_test_modules_that_exist() -> None:
    shipped = set(_shipped())
    for module, tests in _listed().items():
        assert module in shipped, f"tests/README.md lists {module}, which is not a shipped module"
        assert not (ROOT / _mirror(module)).exists(), f"{module} has {_mirror(module)}: take its line out of the list"
        for test in tests:
            assert (ROOT / test).is_file() and test.name.startswith("test_"), f"{module}: no test module {test}"


def test_a_test_module_named_for_a_module_sits_in_that_modules_mirror() -> None:
    by_package: dict[str, list[Path]] = {}
    for module in _shipped():
        by_package.setdefault(module.parts[0], []).append(module)
    misplaced = []
    for test in _test_modules():
        if len(test.parts) < 3 or test.parts[1] not in by_package:
            continue
        namesakes = [m for m in by_package[test.parts[1]] if f"test_{m.name}" == test.name]
        if namesakes and test not in {_mirror(m) for m in namesakes}:
            misplaced.append(f"{test} (mirror of {', '.join(str(m) for m in namesakes)})")
    assert misplaced == [], "move, or rename for the behaviour it tests: " + "; ".join(misplaced)
