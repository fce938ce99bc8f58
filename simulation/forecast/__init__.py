"""A campaign's forecast (`sendhost campaign forecast`): the agent's send path run ahead on a simulated clock over a
copy of the ledger and the guard (simulation.forecast.run)."""

from simulation.forecast.days import Forecast, ForecastDay, Limit
from simulation.forecast.run import Sources, forecast, forecast_all

__all__ = ["Forecast", "ForecastDay", "Limit", "Sources", "forecast", "forecast_all"]
