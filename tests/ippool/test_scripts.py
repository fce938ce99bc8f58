"""Every Lua script documents its KEYS and ARGV, and carries exactly the preludes it calls."""

from __future__ import annotations

from importlib import resources

from ippool.scripts import LIVE, NAMES, PLACE, PRELUDES, USED, script_text
from sendhost.lua_prelude import CLOCK


def test_every_lua_file_opens_with_a_keys_header() -> None:
    files = [f for f in (resources.files("ippool") / "lua").iterdir() if f.name.endswith(".lua")]
    assert {f.name[:-4] for f in files} == {*NAMES, LIVE[1], PLACE[1], USED[1]}
    for file in [*files, resources.files("sendhost") / "lua" / "_clock.lua"]:  # with the clock prelude they share
        header = []
        for line in file.read_text(encoding="utf-8").splitlines():
            if not line.startswith("--"):
                break
            header.append(line)
        # A prelude has no KEYS of its own, and says so; a script names each of its KEYS.
        keys_line = "-- KEYS:" if file.name.startswith("_") else "-- KEYS[1]"
        assert any(line.startswith(keys_line) for line in header), file.name
        if "ARGV[" in file.read_text(encoding="utf-8").split("\n\n", 1)[1]:
            assert any("ARGV[1]" in line for line in header), file.name


def test_scripts_carry_exactly_the_preludes_they_call() -> None:
    folder = resources.files("ippool") / "lua"
    for name in NAMES:
        own = (folder / f"{name}.lua").read_text(encoding="utf-8")
        for prelude, function in ((CLOCK, "now_ms"), (LIVE, "live_leases"), (PLACE, "place"), (USED, "slot_used")):
            calls = f"{function}(" in own
            assert calls == (prelude in PRELUDES.get(name, ())), (name, prelude)
            assert (f"local function {function}(" in script_text(name)) == calls, (name, prelude)
