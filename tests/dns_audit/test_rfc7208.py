"""`check_host` against every scenario of the openspf RFC 7208 test suite, each scenario its own test: the result
and the explanation of a fail, as the suite's reference driver compares them.

The suite ships in the pyspf source distribution on PyPI and is fetched at test time (see rfc7208_suite.py);
on CI a failed fetch fails the run, elsewhere it skips saying why."""

from __future__ import annotations

import asyncio

import pytest

from dns_audit.spf_eval import explain_host_for
from tests.dns_audit.rfc7208_suite import Scenario, SuiteDns, SuiteUnavailable, fetch_suite, load_scenarios
from tests.support.net import on_ci


def _scenarios() -> list[Scenario] | str:
    try:
        return load_scenarios(fetch_suite())
    except SuiteUnavailable as exc:
        return str(exc)


SCENARIOS = _scenarios()


def test_the_whole_suite_was_loaded() -> None:
    if isinstance(SCENARIOS, str):
        if on_ci():
            pytest.fail(f"the RFC 7208 suite is needed on CI: {SCENARIOS}")
        pytest.skip(f"the RFC 7208 suite could not be fetched from PyPI: {SCENARIOS}")
    assert len(SCENARIOS) == 203


@pytest.mark.parametrize("scenario", SCENARIOS if isinstance(SCENARIOS, list) else [],
                         ids=lambda s: s.name)
def test_rfc7208_scenario(scenario: Scenario) -> None:
    """The result, and where the suite gives one, the explanation of a fail (its driver's default: DEFAULT).
    Explanations compare without case: an IPv6 `%{i}` spells its nibbles in either case."""
    result, explanation = asyncio.run(explain_host_for(SuiteDns(scenario.zone), scenario.host, scenario.mailfrom,
                                                       scenario.helo, default_explanation="DEFAULT"))
    assert result in scenario.results, f"{scenario.name}: got {result}, expected one of {scenario.results}"
    if scenario.explanation is not None:
        assert (explanation or "").lower() == scenario.explanation.lower(), scenario.name
