"""Errors of the simulation: bad input (exit 2) and a run that could not finish (exit 1)."""

from __future__ import annotations

from sendhost.errors import ConfigError, OperationFailed


class SimulationConfigError(ConfigError):
    """Bad simulation input (days, sends per day, inventory, zone directory): one line naming it, exit 2."""


class SimulationFailed(OperationFailed):
    """The simulation could not run to the end (embedded Redis or the in-process AWS failed): exit 1."""
