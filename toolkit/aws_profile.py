"""A named AWS profile is configuration: one that does not exist is exit 2, found before any AWS call.

Read the way the AWS CLI and botocore read them (AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE, defaulting to
~/.aws/config and ~/.aws/credentials), so toolkit needs no AWS library to tell a typo from an outage.
"""

from __future__ import annotations

import configparser
from collections.abc import Mapping
from pathlib import Path

from sendhost.errors import ConfigError


def _config_paths(env: Mapping[str, str]) -> tuple[Path, Path]:
    return (Path(env.get("AWS_CONFIG_FILE") or "~/.aws/config").expanduser(),
            Path(env.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials").expanduser())


def _parse(path: Path) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not a valid AWS config file ({exc}); fix it or set AWS_PROFILE to a "
                          "profile of a valid file") from None
    return parser


def profile_names(env: Mapping[str, str]) -> set[str]:
    """Profiles defined in the AWS config and credentials files (`[profile x]`/`[default]`, and `[x]`)."""
    config, credentials = _config_paths(env)
    names: set[str] = set()
    for path, in_config in ((config, True), (credentials, False)):
        for section in _parse(path).sections():
            if in_config and section.startswith("profile "):
                names.add(section.removeprefix("profile ").strip())
            else:
                names.add(section.strip())
    return names


def profile_value(profile: str | None, key: str, env: Mapping[str, str]) -> tuple[str, str] | None:
    """`key` (e.g. `region`, `endpoint_url`) of `profile` (default: `default`) in the AWS config file, where
    botocore reads it, and a note of where it came from; None when it is not set there."""
    name = profile or "default"
    path = _config_paths(env)[0]
    parser = _parse(path)
    for section in ((f"profile {name}", name) if name != "default" else ("default", "profile default")):
        value = parser.get(section, key, fallback="").strip() if parser.has_section(section) else ""
        if value:
            return value, f"profile {name} in {path}"
    return None


def check_profile(profile: str | None, env: Mapping[str, str]) -> None:
    """ConfigError (exit 2) naming AWS_PROFILE when `profile` is set and defined nowhere."""
    if not profile:
        return
    known = profile_names(env)
    if profile not in known:
        listed = ", ".join(sorted(known)) or "none"
        raise ConfigError(f"AWS_PROFILE {profile!r} is not a profile in ~/.aws/config or ~/.aws/credentials "
                          f"(profiles found: {listed}); fix AWS_PROFILE or create it with "
                          f"`aws configure --profile {profile}`")
