"""Reconcile against moto's EC2 and a real Redis: each of its ten kinds of difference, made on purpose, found by
name, and (but for a stranger's EIP) fixed so a second run finds nothing."""

from __future__ import annotations

from collections.abc import Mapping

import boto3
import pytest

from ippool.aws.errors import map_aws_error
from ippool.aws.models import format_parked_until, pool_tags
from ippool.reconcile import KINDS, DifferenceKind, Reconciler
from ippool.spec import TAG_OWNER, TAG_PRIVATE_IP, TAG_PTR, TAG_SINCE
from ippool.states import EipState, SlotState
from sendhost.model import SenderHost
from tests.support.aws import REGION
from tests.support.ippool_world import PTR_RELEASE_DELAY_S, World

HOST = "sender-1"


def created(world: World, slots: int = 2, **policy: object) -> SenderHost:
    spec = world.add_host(HOST, slots=slots, **policy)  # type: ignore[arg-type]
    world.lifecycle().create(spec, slots)
    return spec


def kinds(reconciler: Reconciler, fix: bool = False) -> list[str]:
    return sorted(difference.kind for difference in reconciler.run(fix=fix))


def test_there_are_ten_kinds() -> None:
    assert len(KINDS) == 10 and set(KINDS) == set(DifferenceKind)


def test_nothing_to_report_after_create(world: World) -> None:
    created(world)
    assert world.reconciler(grace_s=0).run() == []


def test_leaked_an_active_eip_serving_no_slot_is_parked(world: World) -> None:
    created(world, slots=1)
    stray = world.aws.allocate_address(pool_tags("sendhost", HOST, 0, EipState.ACTIVE))
    reconciler = world.reconciler()
    [difference] = reconciler.run()
    assert (difference.kind, difference.fixed) == (DifferenceKind.LEAKED, False)
    assert stray.allocation_id in difference.subject
    reconciler.run(fix=True)
    parked = world.aws.get_address(stray.allocation_id)
    assert parked is not None and parked.state == EipState.PARKED
    assert reconciler.run() == []


def test_incoming_never_associated_is_rolled_back(world: World) -> None:
    created(world, slots=1)
    tags = {**pool_tags("sendhost", HOST, 0, EipState.INCOMING), TAG_OWNER: "gone-rotator",
            TAG_SINCE: format_parked_until(world.clock())}
    half = world.aws.allocate_address(tags)
    reconciler = world.reconciler(grace_s=0)
    assert kinds(reconciler) == [DifferenceKind.INCOMING]
    assert kinds(reconciler, fix=True) == [DifferenceKind.INCOMING]
    assert world.aws.get_address(half.allocation_id) is None  # released: it never served
    assert reconciler.run() == []


def test_incoming_within_its_grace_is_left_alone(world: World) -> None:
    created(world, slots=1)
    tags = {**pool_tags("sendhost", HOST, 0, EipState.INCOMING), TAG_OWNER: "busy-rotator",
            TAG_SINCE: format_parked_until(world.clock())}
    world.aws.allocate_address(tags)
    assert world.reconciler(grace_s=120).run() == []


def test_parked_overdue_is_reaped(world: World) -> None:
    created(world, slots=1)
    overdue = world.aws.allocate_address(pool_tags("sendhost", HOST, 0, EipState.PARKED,
                                                   parked_until=world.clock() - 60))
    reconciler = world.reconciler()
    assert kinds(reconciler, fix=True) == [DifferenceKind.PARKED_OVERDUE]
    assert world.aws.get_address(overdue.allocation_id) is None
    assert world.denylist.listed(overdue.public_ip)
    assert reconciler.run() == []


def test_parked_overdue_with_a_ptr_is_listed_unfixed_until_aws_lets_it_go(world: World) -> None:
    # After the PTR reset AWS answers InvalidAddress.PtrSet for minutes: not a fix yet, and not an error.
    aws = world.gaps()
    created(world, slots=1)
    overdue = aws.allocate_address(pool_tags("sendhost", HOST, 0, EipState.PARKED, parked_until=world.clock() - 60))
    aws.create_tags(overdue.allocation_id, {TAG_PTR: "sender-1-0-198-18-0-1.mail.example.com"})
    aws.set_reverse_dns(overdue.allocation_id, "sender-1-0-198-18-0-1.mail.example.com")
    reconciler = world.reconciler(aws=aws)
    [deferred] = reconciler.run(fix=True)
    assert (deferred.kind, deferred.fixed) == (DifferenceKind.PARKED_OVERDUE, False)
    assert "InvalidAddress.PtrSet" in deferred.detail and aws.reverse_dns(overdue.allocation_id) is None
    world.clock.advance(PTR_RELEASE_DELAY_S)
    [released] = reconciler.run(fix=True)
    assert released.fixed and aws.get_address(overdue.allocation_id) is None
    assert reconciler.run() == []


def test_parked_unindexed_is_indexed_in_redis(world: World) -> None:
    created(world, slots=1)
    parked = world.aws.allocate_address(pool_tags("sendhost", HOST, 0, EipState.PARKED,
                                                  parked_until=world.clock() + 600))
    reconciler = world.reconciler()
    assert kinds(reconciler, fix=True) == [DifferenceKind.PARKED_UNINDEXED]
    assert [entry.allocation_id for entry in world.records.parked(HOST)] == [parked.allocation_id]
    assert reconciler.run() == []


def test_slot_missing_is_rebuilt_with_its_budget_spent(world: World) -> None:
    created(world, slots=2)
    world.client.flushdb()  # Redis lost everything
    reconciler = world.reconciler()
    assert kinds(reconciler) == [DifferenceKind.SLOT_MISSING] * 2
    reconciler.run(fix=True)
    for slot in world.slots.status(HOST)[0].slots:
        assert slot.used == slot.budget and slot.state == SlotState.READY  # no send until it rotates
    assert reconciler.run() == []


def test_slot_mismatch_is_rebuilt_from_aws(world: World) -> None:
    created(world, slots=1)
    serving = world.slots.slot_status(HOST, 0)
    world.slots.put_address(HOST, 0, private_ip=serving.private_ip or "", public_ip="198.51.100.9",
                            allocation_id="eipalloc-0elsewhere")
    reconciler = world.reconciler()
    assert kinds(reconciler, fix=True) == [DifferenceKind.SLOT_MISMATCH]
    assert world.slots.slot_status(HOST, 0).allocation_id == serving.allocation_id
    assert reconciler.run() == []


def test_slot_eip_gone_retires_the_slot_so_it_rotates(world: World) -> None:
    created(world, slots=1)
    gone = world.aws.describe_pool_addresses("sendhost", host=HOST)[0]
    assert gone.association_id is not None
    world.aws.disassociate_address(gone.association_id)
    world.aws.release_address(gone.allocation_id)
    reconciler = world.reconciler()
    assert kinds(reconciler, fix=True) == [DifferenceKind.SLOT_EIP_GONE]
    assert world.slots.slot_status(HOST, 0).state == SlotState.READY


def test_stale_claim_of_a_dead_rotator_is_given_back(world: World) -> None:
    created(world, slots=1)
    world.exhaust(HOST, 0)
    [ready] = world.slots.ready_slots(HOST)
    assert world.slots.mark_rotating(HOST, 0, ready.generation) is not None
    world.records.claim(HOST, 0, "dead-rotator")  # no heartbeat: it died before allocating
    reconciler = world.reconciler()
    assert kinds(reconciler, fix=True) == [DifferenceKind.STALE_CLAIM]
    assert world.slots.slot_status(HOST, 0).state == SlotState.READY
    assert world.records.claim_owner(HOST, 0) is None
    assert reconciler.run() == []


def test_a_live_rotators_claim_is_not_stale(world: World) -> None:
    created(world, slots=1)
    world.exhaust(HOST, 0)
    [ready] = world.slots.ready_slots(HOST)
    world.slots.mark_rotating(HOST, 0, ready.generation)
    world.records.claim(HOST, 0, "live-rotator")
    world.records.heartbeat("live-rotator", 60)
    assert world.reconciler().run() == []


def test_untagged_on_slot_is_reported_and_never_touched(world: World) -> None:
    aws = world.gaps()  # reports the private IP an EIP was associated to, as AWS does
    spec = world.add_host(HOST, slots=1)
    world.lifecycle(aws=aws).create(spec, 1)
    slot_ip = world.slots.slot_status(HOST, 0).private_ip or ""
    ec2 = boto3.client("ec2", region_name=REGION)
    stranger = ec2.allocate_address(Domain="vpc")["AllocationId"]  # someone else's EIP: not tagged ours
    ec2.close()
    eni = aws.describe_instance(spec.instance_id).primary_interface.eni_id
    aws.take_over(stranger, eni, slot_ip)  # another tool, with AllowReassociation=True
    reconciler = world.reconciler(aws=aws)
    found = {d.kind: d for d in reconciler.run(fix=True)}
    untagged = found[DifferenceKind.UNTAGGED_ON_SLOT]
    assert stranger in untagged.subject and slot_ip in untagged.detail and not untagged.fixed
    assert [d.kind for d in reconciler.run(fix=True)] == [DifferenceKind.UNTAGGED_ON_SLOT]  # still there
    assert aws.get_address(stranger) is not None and aws.get_address(stranger).tags.get(TAG_PRIVATE_IP) is None


def test_a_fix_refused_for_one_address_is_listed_and_the_rest_go_on(world: World,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # AuthFailure/UnauthorizedOperation on one address (a policy that does not cover it) is that address's problem:
    # reconcile lists it unfixed, fixes the others, and the worker keeps running for every host.
    created(world, slots=1)
    refused = world.aws.allocate_address(pool_tags("sendhost", HOST, 0, EipState.ACTIVE))
    fine = world.aws.allocate_address(pool_tags("sendhost", HOST, 0, EipState.ACTIVE))
    create_tags = world.aws.create_tags

    def refusing_create_tags(resource_id: str, tags: Mapping[str, str]) -> None:  # AWS's answer, for one EIP
        if resource_id == refused.allocation_id:
            raise map_aws_error("UnauthorizedOperation", "You are not authorized to perform this operation.",
                                operation="CreateTags", subject=f"EIP {resource_id}", region=REGION, attempts=1)
        create_tags(resource_id, tags)

    monkeypatch.setattr(world.aws, "create_tags", refusing_create_tags)
    found = {d.subject.split()[0]: d for d in world.reconciler().run(fix=True)}
    assert found[fine.allocation_id].fixed
    assert not found[refused.allocation_id].fixed
    assert "UnauthorizedOperation" in found[refused.allocation_id].detail
    worker = world.worker("test-worker", interval_s=0)
    assert worker.run(once=True) == 1  # the refusal does not stop the worker


def test_slot_not_ours_never_touches_aws_and_rebuilds_the_slot_from_it(world: World) -> None:
    created(world, slots=1)
    serving = world.slots.slot_status(HOST, 0)
    theirs = world.aws.allocate_address(pool_tags("another-pool", HOST, 0, EipState.ACTIVE))
    world.slots.put_address(HOST, 0, private_ip=serving.private_ip or "", public_ip=theirs.public_ip,
                            allocation_id=theirs.allocation_id)
    reconciler = world.reconciler()
    [difference] = reconciler.run()
    assert (difference.kind, difference.fixed) == (DifferenceKind.SLOT_NOT_OURS, False)
    assert "sendhost:pool=another-pool (want sendhost)" in difference.detail
    assert kinds(reconciler, fix=True) == [DifferenceKind.SLOT_NOT_OURS]
    assert world.slots.slot_status(HOST, 0).allocation_id == serving.allocation_id
    assert world.aws.get_address(theirs.allocation_id) == theirs  # same tags, still unattached: not touched
    assert reconciler.run() == []


def test_slot_not_ours_a_private_ip_off_the_interface_is_reported(world: World) -> None:
    spec = created(world, slots=1)
    primary = world.aws.describe_instance(spec.instance_id).primary_interface.primary_private_ip
    held = world.slots.slot_status(HOST, 0)
    world.slots.put_address(HOST, 0, private_ip=primary, public_ip=held.public_ip,
                            allocation_id=held.allocation_id)
    [difference] = world.reconciler().run()
    assert difference.kind == DifferenceKind.SLOT_NOT_OURS
    assert f"{primary} is the primary private IP" in difference.detail
