"""moto's list of a response class's actions read once per class, not once per request, while a simulation runs.

For every request, moto's `BaseResponse.call_action` asks `method_names_from_class(type(self))` whether the action
is one of the class's methods, and that runs `inspect.getmembers` over the whole class (hundreds of members for
EC2's): about a twentieth of `make demo`'s time went there. A class's methods do not change while a simulation
runs, so `cached_action_names()` answers from the first reading of each class, the same list, and puts moto's
function back after.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cached_action_names() -> Iterator[None]:
    import moto.core.responses as responses

    original = responses.method_names_from_class
    read: dict[object, list[str]] = {}

    def method_names(clazz: object) -> list[str]:
        names = read.get(clazz)
        if names is None:
            names = read[clazz] = original(clazz)
        return list(names)  # a copy: the caller gets a list of its own, as from moto

    responses.method_names_from_class = method_names
    try:
        yield
    finally:
        responses.method_names_from_class = original
