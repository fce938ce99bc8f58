"""What `sendhost provision` hands the sender_agent role: a wheel built offline from this checkout, a named wheel,
or the version to take from the inventory's index; bad input names itself."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from provisioning.agent_package import (
    agent_package,
    build_wheel,
    checkout_root,
    controller_version,
    index_url_in_inventory,
    wheel_version,
)
from provisioning.errors import ProvisionConfigError
from tests.conftest import REPO_ROOT


def inventory_with(tmp_path: Path, all_vars: str = "") -> Path:
    path = tmp_path / "inventory.yml"
    path.write_text("all:\n" + (f"  vars:\n{all_vars}" if all_vars else "") +
                    "  children:\n    senders:\n      hosts:\n        sender-1:\n")
    return path


def test_the_checkout_is_found_from_the_package_and_an_installed_wheel_has_none(tmp_path: Path) -> None:
    assert checkout_root() == REPO_ROOT
    (tmp_path / "site-packages" / "provisioning").mkdir(parents=True)
    assert checkout_root(tmp_path / "site-packages" / "provisioning") is None
    other = tmp_path / "other"
    (other / "provisioning").mkdir(parents=True)
    (other / "pyproject.toml").write_text('[project]\nname = "someone-else"\nversion = "1"\n')
    assert checkout_root(other / "provisioning") is None


@pytest.mark.slow
def test_two_builds_of_one_tree_are_the_same_bytes_and_ship_the_playbooks(agent_wheel: Path, tmp_path: Path) -> None:
    again = build_wheel(REPO_ROOT, tmp_path)

    # the role reinstalls when the wheel's sha256 changes: an unchanged checkout must not look changed
    assert hashlib.sha256(again.read_bytes()).hexdigest() == hashlib.sha256(agent_wheel.read_bytes()).hexdigest()
    assert again.name == f"sendhost-{controller_version()}-py3-none-any.whl"
    names = zipfile.ZipFile(again).namelist()
    assert "provisioning/playbooks/roles/sender_agent/tasks/install.yml" in names
    assert not any(name.startswith("tests/") for name in names)
    assert not (REPO_ROOT / "build").exists()  # built in a copy, never in the checkout


def test_a_named_wheel_is_used_as_it_is(tmp_path: Path) -> None:
    wheel = tmp_path / "sendhost-2.3.4-py3-none-any.whl"
    wheel.write_bytes(b"PK")

    package = agent_package(inventory_with(tmp_path), {"SENDHOST_AGENT_WHEEL": str(wheel)}, tmp_path / "build")

    assert package.extravars() == {"sendhost_package_version": "2.3.4", "sendhost_agent_wheel": str(wheel)}
    assert not (tmp_path / "build").exists()  # nothing built


@pytest.mark.parametrize(("name", "problem"), [
    ("missing.whl", "is not a file; build one or unset it"),
    ("other-1.0-py3-none-any.whl", "not a sendhost wheel"),
    ("sendhost.tar.gz", "not a sendhost wheel"),
])
def test_a_bad_named_wheel_is_refused_naming_it(tmp_path: Path, name: str, problem: str) -> None:
    if name != "missing.whl":
        (tmp_path / name).write_bytes(b"PK")
    with pytest.raises(ProvisionConfigError, match=problem):
        agent_package(inventory_with(tmp_path), {"SENDHOST_AGENT_WHEEL": str(tmp_path / name)}, tmp_path)


def test_an_index_in_the_inventory_means_no_wheel_and_this_version(tmp_path: Path) -> None:
    inventory = inventory_with(tmp_path, "    sendhost_package_index_url: https://pypi.example.com/simple\n")

    package = agent_package(inventory, {}, tmp_path / "build")

    assert package.extravars() == {"sendhost_package_version": controller_version()}
    assert not (tmp_path / "build").exists()


@pytest.mark.parametrize("url", ["ftp://pypi.example.com/simple", "pypi.example.com", "https://", "file:///srv/x"])
def test_an_index_url_that_is_not_http_is_refused_naming_the_key(tmp_path: Path, url: str) -> None:
    inventory = inventory_with(tmp_path, f"    sendhost_package_index_url: '{url}'\n")
    with pytest.raises(ProvisionConfigError, match=r"sendhost_package_index_url: .* is not an http\(s\) URL"):
        index_url_in_inventory(inventory)


def test_no_index_url_reads_as_none(tmp_path: Path) -> None:
    assert index_url_in_inventory(inventory_with(tmp_path)) is None
    assert index_url_in_inventory(inventory_with(tmp_path, "    sendhost_package_index_url: ''\n")) is None


def test_wheel_version_comes_from_the_file_name() -> None:
    assert wheel_version(Path("/w/sendhost-0.1.0-py3-none-any.whl")) == "0.1.0"
    assert wheel_version(Path("sendhost-1.2.0.dev3-py3-none-any.whl")) == "1.2.0.dev3"
