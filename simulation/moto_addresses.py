"""moto's DescribeAddresses answer rendered one address at a time, each address's XML kept while it is unchanged,
while a simulation runs.

moto renders every answer through its generic serializer, which looks up each member of each address by reflection
and then writes the XML: about 2 ms of CPU an address. The pool's reads and the simulation's read-back describe
the same addresses again and again (a fleet of 50 hosts holds 150 of them, read whole after every cycle that
rotated), and most of them have not changed since the last answer: that rendering was most of
`simulate --hosts 50`'s AWS time.

`cached_address_rendering()` builds the same body from the same pieces: each address is rendered by moto itself
(an answer of that one address), the first time it is seen in its present state; an address whose state is as
before gets its earlier piece. Its state is everything moto's serializer can read of it: its own attributes, the
network interface's and instance's fields its properties read, and its tags in moto's store, in their order. An
address holding anything else is rendered by moto whole, as is any answer the pieces do not fit (an empty one,
pretty-printed responses). tests/simulation/test_moto_addresses.py checks the bodies against moto's own through a
run of allocations, tags, associations and releases. AWS's answer is unchanged: only the repeated rendering goes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

ITEM_LIST_OPEN = "<addressesSet>"
ITEM_LIST_CLOSE = "</addressesSet>"


class _Renderer:
    """The pieces of DescribeAddresses answers: each address's XML by its state, and the text around the list."""

    def __init__(self, render: Any) -> None:
        self._render = render  # moto's ActionResult.execute_result
        self._items: dict[tuple[object, ...], str] = {}
        self._frame: tuple[int, dict[str, Any], str, str] | None = None  # status, headers, before, after the items

    def answer(self, result: Any, context: Any) -> Any:
        from moto import settings
        from moto.core.responses import ActionResult

        addresses = result.result.get("Addresses") if isinstance(result.result, dict) else None
        if settings.PRETTIFY_RESPONSES or not isinstance(addresses, list) or not addresses \
                or set(result.result) != {"Addresses"}:
            return self._render(result, context)
        pieces = []
        for address in addresses:
            state = _state_of(address)
            piece = self._items.get(state) if state is not None else None
            if piece is None:
                split = self._one(ActionResult({"Addresses": [address]}), context)
                if split is None:
                    return self._render(result, context)
                piece = split
                if state is not None:
                    self._items[state] = piece
            pieces.append(piece)
        assert self._frame is not None  # set by the first `_one`
        status, headers, before, after = self._frame
        return status, dict(headers), before + "".join(pieces) + after

    def _one(self, single: Any, context: Any) -> str | None:
        """One address's answer rendered by moto, cut into the text around the list and the address's piece;
        None when it does not have the expected shape or its frame differs from the one kept."""
        status, headers, body = self._render(single, context)
        if not isinstance(body, str):
            return None
        start = body.find(ITEM_LIST_OPEN)
        end = body.rfind(ITEM_LIST_CLOSE)
        if start < 0 or end < start or body.count(ITEM_LIST_OPEN) != 1:
            return None
        start += len(ITEM_LIST_OPEN)
        frame = (status, dict(headers), body[:start], body[end:])
        if self._frame is None:
            self._frame = frame
        elif self._frame != frame:
            return None
        return body[start:end]


def _state_of(address: Any) -> tuple[object, ...] | None:
    """Everything moto's serializer can read of an ElasticAddress; None for an attribute of a kind not known here
    (that address is then rendered by moto every time)."""
    fields: list[tuple[object, ...]] = []
    for name, value in vars(address).items():
        if name == "ec2_backend":
            continue
        if value is None or isinstance(value, (str, int, float, bool)):
            fields.append((name, value))
        elif name == "eni":
            fields.append((name, value.id, value.owner_id, value.private_ip_address))
        elif name == "instance":
            fields.append((name, value.id))
        else:
            return None
    tags = address.ec2_backend.tags.get(address.id) if address.id else None
    return (type(address), tuple(fields), tuple(tags.items()) if tags else ())


@contextmanager
def cached_address_rendering() -> Iterator[None]:
    from moto.core.responses import ActionResult
    from moto.ec2.responses.elastic_ip_addresses import ElasticIPAddresses

    original = ElasticIPAddresses.describe_addresses
    renderer = _Renderer(ActionResult.execute_result)

    class _Addresses(ActionResult):
        def execute_result(self, context: Any) -> Any:
            return renderer.answer(self, context)

    def describe_addresses(self: Any) -> ActionResult:
        answer = original(self)
        return _Addresses(answer.result) if type(answer) is ActionResult else answer

    ElasticIPAddresses.describe_addresses = describe_addresses  # type: ignore[method-assign]
    try:
        yield
    finally:
        ElasticIPAddresses.describe_addresses = original  # type: ignore[method-assign]
