"""moto's per-resource tag lookup without its scan of every tag in the account, while a simulation runs.

moto answers "the tags of resource X" (`TaggedEC2Resource.get_tags`, called for every address a DescribeAddresses
filters, once per filter) by running `describe_tags` with a `resource-id` filter: a regular expression matched
against the id of every tag of every resource in the region. A fleet's describe then costs addresses x filters x
every tag, which grew with the square of the hosts and was most of `simulate --hosts 50`'s AWS time.

`indexed_tags()` answers the same question from moto's own tag store, keyed by resource id, for as long as the
simulation runs, and puts moto's method back after. The answer is moto's, entry for entry and in its order (a
resource id holds no `*` or `?`, so moto's pattern matches that id alone: tests/simulation/test_moto_tags.py checks
the two agree), so no AWS behaviour changes: only the scan goes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def indexed_tags() -> Iterator[None]:
    from moto.ec2.models.core import TaggedEC2Resource

    original = TaggedEC2Resource.get_tags
    TaggedEC2Resource.get_tags = _tags_of  # type: ignore[method-assign, assignment]
    try:
        yield
    finally:
        TaggedEC2Resource.get_tags = original  # type: ignore[method-assign]


def _tags_of(resource: Any) -> list[dict[str, str]]:
    """What moto's get_tags returns for `resource`, read from its backend's tags of that id alone."""
    from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, get_prefix

    resource_id = resource.id
    if not resource_id:
        return []
    tags = resource.ec2_backend.tags.get(resource_id)
    if not tags:
        return []
    kind = EC2_PREFIX_TO_RESOURCE.get(get_prefix(resource_id), "")
    return [{"resource_id": resource_id, "key": key, "value": value, "resource_type": kind}
            for key, value in tags.items()]
