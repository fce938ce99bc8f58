"""Route 53 calls of the pool: the forward A record a slot's reverse DNS needs."""

from __future__ import annotations

from ippool import errors
from ippool.aws.client import AwsClient


class Route53Calls(AwsClient):
    """The Route 53 half of the adapter; hosted zone ids are looked up once per zone."""

    def _zone_id(self, zone_name: str) -> str:
        wanted = zone_name.rstrip(".").lower() + "."
        if wanted not in self._zone_ids:
            response = self._call("route53", "ListHostedZonesByName", f"zone {wanted}", DNSName=wanted, MaxItems="1")
            zones = [z for z in response.get("HostedZones", []) if z["Name"].lower() == wanted]
            if not zones:
                raise errors.HostedZoneNotFound(
                    f"Route 53 has no hosted zone {wanted}: create it or fix the host's PTR zone in the inventory")
            self._zone_ids[wanted] = zones[0]["Id"].rsplit("/", 1)[-1]
        return self._zone_ids[wanted]

    def _change_a_record(self, action: str, zone_name: str, record_name: str, ip: str, ttl: int) -> None:
        zone_id = self._zone_id(zone_name)
        change = {"Action": action, "ResourceRecordSet": {
            "Name": record_name, "Type": "A", "TTL": ttl, "ResourceRecords": [{"Value": ip}]}}
        self._call("route53", "ChangeResourceRecordSets", f"record {record_name} A {ip}",
                   HostedZoneId=zone_id, ChangeBatch={"Changes": [change]})

    def upsert_a_record(self, zone_name: str, record_name: str, ip: str, ttl: int = 300) -> None:
        """Create or replace `record_name` A `ip` in the named hosted zone (the forward half of PTR)."""
        self._change_a_record("UPSERT", zone_name, record_name, ip, ttl)

    def delete_a_record(self, zone_name: str, record_name: str, ip: str, ttl: int = 300) -> bool:
        """Delete `record_name` A `ip`; False when no such record was there (callers treat that as done)."""
        try:
            self._change_a_record("DELETE", zone_name, record_name, ip, ttl)
        except errors.AwsRequestFailed as exc:
            # Route 53 says InvalidChangeBatch "... but it was not found" for a record that is already gone.
            if exc.code == "InvalidChangeBatch" and "not found" in str(exc):
                return False
            raise
        return True

