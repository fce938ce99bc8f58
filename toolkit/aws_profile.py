"""A named AWS profile is configuration: one that does not exist is exit 2, found before any AWS call.

Read the way the AWS CLI and botocore read them (AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE, defaulting to
~/.aws/config and ~/.aws/credentials), so toolkit needs no AWS library to tell a typo from an outage.
"""

from __future__ import annotations

import configparser
from collections.abc import Mapping
from pathlib import Path

from sendhost.errors import ConfigError


def profile_names(env: Mapping[str, str]) -> set[str]:
    """Profiles defined in the AWS config and credentials files (`[profile x]`/`[default]`, and `[x]`)."""
    config = Path(env.get("AWS_CONFIG_FILE") or "~/.aws/config").expanduser()
    credentials = Path(env.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials").expanduser()
    names: set[str] = set()
    for path, in_config in ((config, True), (credentials, False)):
        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: not a valid AWS config file ({exc}); fix it or set AWS_PROFILE to a "
                              "profile of a valid file") from None
        for section in parser.sections():
            if in_config and section.startswith("profile "):
                names.add(section.removeprefix("profile ").strip())
            else:
                names.add(section.strip())
    return names


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
