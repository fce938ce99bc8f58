"""The adapter's Route 53 calls against moto."""

from __future__ import annotations

import boto3
import pytest

from ippool import errors
from tests.support.aws import REGION, AdapterFactory

pytestmark = pytest.mark.usefixtures("moto_aws")



def test_route53_upsert_and_delete_an_a_record(make_adapter: AdapterFactory) -> None:
    route53 = boto3.client("route53", region_name=REGION)
    zone_id = route53.create_hosted_zone(Name="mail.example.com", CallerReference="t")["HostedZone"]["Id"]
    adapter = make_adapter()

    def a_records() -> dict[str, list[str]]:
        sets = route53.list_resource_record_sets(HostedZoneId=zone_id)["ResourceRecordSets"]
        return {s["Name"]: [r["Value"] for r in s["ResourceRecords"]] for s in sets if s["Type"] == "A"}

    adapter.upsert_a_record("mail.example.com", "s1.mail.example.com", "198.18.0.1")
    adapter.upsert_a_record("mail.example.com.", "s1.mail.example.com", "198.18.0.2")  # replaces, trailing dot ok
    assert a_records() == {"s1.mail.example.com.": ["198.18.0.2"]}
    assert adapter.delete_a_record("mail.example.com", "s1.mail.example.com", "198.18.0.2") is True
    assert a_records() == {}
    route53.close()


def test_route53_unknown_zone_is_a_config_error(make_adapter: AdapterFactory) -> None:
    with pytest.raises(errors.HostedZoneNotFound, match=r"nowhere\.example\.") as caught:
        make_adapter().upsert_a_record("nowhere.example", "s1.nowhere.example", "198.18.0.1")
    assert caught.value.exit_code == 2

