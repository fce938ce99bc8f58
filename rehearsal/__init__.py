"""`sendhost sandbox`: a rehearsal world that stays up between commands, under <state dir>/sandbox/.

Unlike the simulation's world (simulation/sandbox.py: in process, thrown away at the end), this one is a set of
detached processes that outlive each command, so the CLI runs against it exactly as against a real deployment.

AWS as moto's server (a detached process), the embedded Redis and PostgreSQL of the sandbox directory, and a
submission server with AUTH that records the peer of every message. `up` writes an inventory and an environment
file pointing at them, so the pool, sender and warm-up commands run against the sandbox unchanged.
"""
