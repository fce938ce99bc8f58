"""Real services for the test suite: Redis, the moto server, a controllable clock."""
