"""Route 53 calls of the pool: the forward A record a slot's reverse DNS needs."""

from __future__ import annotations

from ippool import errors
from ippool.aws.client import AwsClient

# Route 53 propagates a change to all its name servers within about 60 s.
CHANGE_WAIT_S = 300.0
CHANGE_POLL_S = 5.0


class Route53Calls(AwsClient):
    """The Route 53 half of the adapter; hosted zone ids are looked up once per zone."""

    def public_zone_id(self, zone_name: str) -> str:
        """The id of the public hosted zone `zone_name`; HostedZoneNotFound (exit 2) when Route 53 has none of that
        name, or only a private one. `pool create` asks it before allocating anything."""
        wanted = zone_name.rstrip(".").lower() + "."
        if wanted not in self._zone_ids:
            # Several zones may share the name (a private one per VPC besides the public one): ask for a page.
            response = self._call("route53", "ListHostedZonesByName", f"zone {wanted}", DNSName=wanted,
                                  MaxItems="100")
            named = [z for z in response.get("HostedZones", []) if z["Name"].lower() == wanted]
            # A private zone answers only inside its VPCs: the world checking our PTR never sees it.
            public = [z for z in named if not z.get("Config", {}).get("PrivateZone", False)]
            if not public:
                private = " (only a private zone has that name: the forward record must be public)" if named else ""
                raise errors.HostedZoneNotFound(
                    f"Route 53 has no public hosted zone {wanted}{private}: create a public zone of that name or "
                    f"fix the host's PTR zone in the inventory")
            self._zone_ids[wanted] = public[0]["Id"].rsplit("/", 1)[-1]
        return self._zone_ids[wanted]

    def _change_a_record(self, action: str, zone_name: str, record_name: str, ip: str, ttl: int) -> str:
        zone_id = self.public_zone_id(zone_name)
        change = {"Action": action, "ResourceRecordSet": {
            "Name": record_name, "Type": "A", "TTL": ttl, "ResourceRecords": [{"Value": ip}]}}
        response = self._call("route53", "ChangeResourceRecordSets", f"record {record_name} A {ip}",
                              HostedZoneId=zone_id, ChangeBatch={"Changes": [change]})
        return str(response.get("ChangeInfo", {}).get("Id", "")).rsplit("/", 1)[-1]

    def upsert_a_record(self, zone_name: str, record_name: str, ip: str, ttl: int = 300) -> str:
        """Create or replace `record_name` A `ip` in the named hosted zone (the forward half of PTR); return the
        change id, which `wait_for_change` waits on."""
        return self._change_a_record("UPSERT", zone_name, record_name, ip, ttl)

    def wait_for_change(self, change_id: str, *, timeout_s: float = CHANGE_WAIT_S,
                        interval_s: float = CHANGE_POLL_S) -> None:
        """Poll GetChange until Route 53 reports the change INSYNC (served by all its name servers): AWS checks
        the forward record before it sets a PTR, so a PENDING record would fail the PTR update."""
        deadline = self._clock() + timeout_s
        while True:
            response = self._call("route53", "GetChange", f"change {change_id}", Id=change_id)
            if response.get("ChangeInfo", {}).get("Status") == "INSYNC":
                return
            if self._clock() >= deadline:
                raise errors.AwsRequestFailed(
                    f"Route 53 change {change_id} still PENDING after {timeout_s:.0f}s: retried on the next cycle")
            self._sleep(interval_s)

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

