"""botocore's service models and endpoints read from disk once per simulation, not once per botocore session.

Each botocore session has a loader of its own, which decompresses and parses a service's model the first time that
session asks for it. A simulation's sessions ask for EC2's (megabytes of JSON) six times: moto's EC2 module makes
three sessions at import to list the regions of three partitions, its backends make another, moto reads the model
for its own serializer, and the run's boto3 session for its client; Route 53's twice; the endpoints five times.
That was a fifth of a one-day run's CPU, and the same at the start of every run.

`shared_botocore_data()` keeps what a loader read from a file, by the file it found, for every loader while the
simulation runs, and puts botocore's method back after. Only service models
(`.../service-2`) and the endpoints are kept: the files read for what they are, never changed after (a session
reads them once and hands the same objects to each of its clients already), so a loader gets what it would have
read itself. tests/simulation/test_botocore_data.py checks that.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def _kept(name: str) -> bool:
    return name == "endpoints" or name.endswith("/service-2")


def _file_of(loader: Any, name: str) -> str | None:
    """The file `loader` reads for `name`: the first of its search paths that has it, as botocore looks (moto's
    loader searches its own folder first, and finds botocore's file for EC2 like the sessions' loaders)."""
    for possible in loader._potential_locations(name):
        if loader.file_loader.exists(possible):
            return str(possible)
    return None


@contextmanager
def shared_botocore_data() -> Iterator[None]:
    from botocore.loaders import Loader

    original = Loader.load_data_with_path
    read: dict[str, Any] = {}  # the file a loader reads for a name -> what it read

    def load_data_with_path(self: Loader, name: str) -> Any:
        found = _file_of(self, name) if _kept(name) else None
        if found is None:
            return original(self, name)
        if found not in read:
            read[found] = original(self, name)
        return read[found]

    Loader.load_data_with_path = load_data_with_path
    try:
        yield
    finally:
        Loader.load_data_with_path = original
