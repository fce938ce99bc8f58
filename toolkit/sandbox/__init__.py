"""`sendhost sandbox`: a rehearsal world that stays up between commands, under <state dir>/sandbox/.

AWS as moto's server (a detached process), the embedded Redis and PostgreSQL of the sandbox directory, and a
submission server with AUTH that records the peer of every message. `up` writes an inventory and an environment
file pointing at them, so the pool, sender and warm-up commands run against the sandbox unchanged.
"""
