"""A bad AWS_PROFILE is a configuration error (exit 2, naming it); AWS that cannot be reached is exit 1."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import REPO_ROOT, run_cli
from tests.support.net import free_port


def _reconcile(redis_url: str, tmp_path: Path, **env: str):  # type: ignore[no-untyped-def]
    config = tmp_path / "aws-config"
    config.write_text("[default]\nregion = us-east-1\n\n[profile deploy]\nregion = us-east-1\n")
    credentials = tmp_path / "aws-credentials"
    credentials.write_text("[deploy]\naws_access_key_id = testing\naws_secret_access_key = testing\n")
    base = {"AWS_CONFIG_FILE": str(config), "AWS_SHARED_CREDENTIALS_FILE": str(credentials),
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}", "AWS_MAX_ATTEMPTS": "1"}
    return run_cli("--inventory", str(REPO_ROOT / "inventory.example.yml"), "--redis-url", redis_url,
                   "pool", "reconcile", env={**base, **env}, cwd=tmp_path, timeout=120)


def test_a_profile_that_does_not_exist_is_exit_2_naming_it(redis_url: str, tmp_path: Path) -> None:
    result = _reconcile(redis_url, tmp_path, AWS_PROFILE="deplyo")
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: AWS_PROFILE 'deplyo' is not a profile")
    assert "(profiles found: default, deploy)" in result.stderr and result.stderr.count("\n") == 1


def test_a_good_profile_with_aws_unreachable_is_exit_1(redis_url: str, tmp_path: Path) -> None:
    result = _reconcile(redis_url, tmp_path, AWS_PROFILE="deploy")
    assert result.returncode == 1, result.stderr
    assert "could not reach AWS" in result.stderr and "AWS_PROFILE" not in result.stderr
