"""What the `sender_agent` role installs on a host: a wheel of this very sendhost, or a version from an index.

`sendhost provision` builds the wheel from the checkout it runs from (offline: no build isolation, no index), so a
host runs the code that provisioned it. A sendhost installed from an index has no source to build from; its
inventory names `sendhost_package_index_url` instead and the host installs the same version from there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from provisioning.errors import ProvisionConfigError, ProvisionFailed
from sendhost.yaml_lines import Vaulted, load_yaml_with_lines

DISTRIBUTION = "sendhost"
# Zip entries take this time instead of each file's mtime, so two builds of the same tree are the same bytes and
# the role's checksum sees nothing to reinstall (1980-01-01, the earliest time a zip file can hold).
REPRODUCIBLE_EPOCH = "315532800"
# Never copied into the build tree: VCS data, environments, caches, earlier build outputs, tests and benchmarks.
_PACKAGE_DIR = Path(__file__).resolve().parent
_NOT_SOURCE = (".git", ".venv", ".sendhost", "*cache*", "build", "dist", "*.egg-info", "__pycache__", "tests", "bench")


@dataclass(frozen=True)
class AgentPackage:
    """Extra vars for the role: the wheel to copy, or the version to take from the inventory's index."""

    version: str
    wheel: Path | None = None

    def extravars(self) -> dict[str, Any]:
        names: dict[str, Any] = {"sendhost_package_version": self.version}
        if self.wheel is not None:
            names["sendhost_agent_wheel"] = str(self.wheel)
        return names


def checkout_root(package_dir: Path = _PACKAGE_DIR) -> Path | None:
    """The sendhost checkout this code runs from (editable install or PYTHONPATH), or None for an installed wheel."""
    root = package_dir.parent
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        return None
    project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    return root if project.get("name") == DISTRIBUTION else None


def index_url_in_inventory(inventory: Path) -> str | None:
    """`sendhost_package_index_url` from the inventory's `all.vars`, checked to be an http(s) URL; None if unset."""
    data = load_yaml_with_lines(inventory)  # the inventory's own loader: bounded, vault values opaque
    group = data.get("all") if isinstance(data, dict) else None
    all_vars = group.get("vars") if isinstance(group, dict) else None
    value = all_vars.get("sendhost_package_index_url") if isinstance(all_vars, dict) else None
    if value in (None, ""):
        return None
    if isinstance(value, Vaulted):
        raise ProvisionConfigError(f"{inventory}: sendhost_package_index_url is vault-encrypted; write it in clear "
                                   "(an index URL is no secret; put credentials in pip's own configuration)")
    parts = urlsplit(str(value))
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ProvisionConfigError(
            f"{inventory}: sendhost_package_index_url: {value!r} is not an http(s) URL; "
            "name a package index such as https://pypi.org/simple"
        )
    return str(value)


def build_wheel(source: Path, out_dir: Path, python: str = sys.executable) -> Path:
    """Build sendhost's wheel from `source` into `out_dir` without touching the network or the checkout."""
    tree = out_dir / "source"
    shutil.copytree(source, tree, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
    built = subprocess.run(
        [python, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "--quiet",
         "--disable-pip-version-check", "--wheel-dir", str(out_dir), str(tree)],
        capture_output=True, text=True, check=False,
        env={**os.environ, "SOURCE_DATE_EPOCH": REPRODUCIBLE_EPOCH},
    )
    shutil.rmtree(tree, ignore_errors=True)
    if built.returncode != 0:
        reason = (built.stderr.strip().splitlines() or ["pip wheel failed"])[-1]
        if "setuptools" in built.stderr:
            raise ProvisionConfigError(
                f"cannot build the sendhost wheel for the hosts offline: {reason}; "
                "pip install 'setuptools>=77' beside sendhost, or set sendhost_package_index_url in the inventory"
            )
        raise ProvisionFailed(f"building the sendhost wheel for the hosts failed: {reason}")
    wheels = sorted(out_dir.glob(f"{DISTRIBUTION}-*.whl"))
    if len(wheels) != 1:
        raise ProvisionFailed(f"building the sendhost wheel left {len(wheels)} wheels in {out_dir}, expected one")
    return wheels[0]


def controller_version(root: Path | None = None) -> str:
    """The version of the sendhost running here: its checkout's pyproject, else its installed metadata."""
    root = root if root is not None else checkout_root()
    if root is not None:
        return str(tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])
    return metadata.version(DISTRIBUTION)


def wheel_version(wheel: Path) -> str:
    """The version a wheel's file name carries (`sendhost-0.1.0-py3-none-any.whl` -> `0.1.0`)."""
    parts = wheel.name.split("-")
    if len(parts) < 5 or parts[0] != DISTRIBUTION or not wheel.name.endswith(".whl"):
        raise ProvisionConfigError(
            f"{wheel}: not a sendhost wheel (expected sendhost-VERSION-py3-none-any.whl); fix SENDHOST_AGENT_WHEEL"
        )
    return parts[1]


def agent_package(inventory: Path, env: Mapping[str, str], build_dir: Path) -> AgentPackage:
    """Decide what the hosts install: SENDHOST_AGENT_WHEEL, else the inventory's index, else a wheel built here."""
    named = env.get("SENDHOST_AGENT_WHEEL")
    if named:
        wheel = Path(named)
        if not wheel.is_file():
            raise ProvisionConfigError(f"SENDHOST_AGENT_WHEEL={named} is not a file; build one or unset it")
        return AgentPackage(version=wheel_version(wheel), wheel=wheel.resolve())
    if index_url_in_inventory(inventory) is not None:
        return AgentPackage(version=controller_version())
    source = checkout_root()
    if source is None:
        raise ProvisionConfigError(
            "this sendhost was installed from a package index, so there is no source to build the hosts' wheel from; "
            "set sendhost_package_index_url in the inventory (e.g. https://pypi.org/simple) or SENDHOST_AGENT_WHEEL"
        )
    wheel = build_wheel(source, build_dir)
    return AgentPackage(version=wheel_version(wheel), wheel=wheel)
