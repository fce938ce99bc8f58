"""Retries against a real HTTP endpoint that fails the way AWS sometimes does (5xx, a dropped connection).

A named fake EC2 endpoint (`FlakyEc2`) answers each request with the next planned failure, then with AWS's
well-formed answer, so botocore's real retry machinery runs: reads are retried (botocore's `standard` mode),
mutating Elastic IP calls are sent once (a repeated Allocate or Associate could act twice).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import boto3
import pytest

from ippool import errors
from ippool.aws.adapter import Ec2Adapter
from ippool.aws.client import READ_MAX_ATTEMPTS
from tests.support.aws import FAKE_CREDENTIALS, REGION

ERROR_XML = ("<Response><Errors><Error><Code>Unavailable</Code><Message>Service unavailable</Message></Error>"
             "</Errors><RequestID>r-1</RequestID></Response>")
ANSWERS = {
    "DescribeAddresses": '<DescribeAddressesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
                         "<requestId>r-2</requestId><addressesSet/></DescribeAddressesResponse>",
    "ReleaseAddress": '<ReleaseAddressResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
                      "<requestId>r-3</requestId><return>true</return></ReleaseAddressResponse>",
}
DROP = 0  # a planned "failure" that closes the connection without an answer


class FlakyEc2(ThreadingHTTPServer):
    """Named fake: an EC2 endpoint failing each request with the next planned status (or DROP), then answering."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.planned: list[int] = []
        self.actions: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: FlakyEc2

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        action = parse_qs(body)["Action"][0]
        self.server.actions.append(action)
        status = self.server.planned.pop(0) if self.server.planned else 200
        if status == DROP:
            self.close_connection = True
            self.connection.close()
            return
        text = (ANSWERS[action] if status == 200 else ERROR_XML).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    def log_message(self, format: str, *args: object) -> None:  # quiet
        return None


@pytest.fixture
def flaky_ec2() -> Iterator[FlakyEc2]:
    server = FlakyEc2()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def _adapter(server: FlakyEc2) -> Ec2Adapter:
    return Ec2Adapter(lambda: boto3.Session(region_name=REGION, **FAKE_CREDENTIALS), REGION, endpoint_url=server.url,
                      sleep=lambda seconds: None)


def test_a_read_is_retried_by_botocore_through_5xx_and_a_dropped_connection(flaky_ec2: FlakyEc2) -> None:
    flaky_ec2.planned = [503, DROP, 500]
    with _adapter(flaky_ec2) as adapter:
        assert adapter.describe_pool_addresses("sendhost") == []
    assert flaky_ec2.actions == ["DescribeAddresses"] * 4


def test_a_read_failing_every_attempt_is_reported_once_botocore_gives_up(flaky_ec2: FlakyEc2) -> None:
    flaky_ec2.planned = [503] * READ_MAX_ATTEMPTS
    with _adapter(flaky_ec2) as adapter, pytest.raises(errors.AwsRequestFailed, match="Unavailable"):
        adapter.describe_pool_addresses("sendhost")
    assert flaky_ec2.actions == ["DescribeAddresses"] * READ_MAX_ATTEMPTS


def test_a_mutating_eip_call_is_sent_once_on_a_5xx(flaky_ec2: FlakyEc2) -> None:
    # The release may have happened before the 503: sending it again is the caller's decision (the reaper's next
    # cycle reads AWS first), never botocore's.
    flaky_ec2.planned = [503]
    with _adapter(flaky_ec2) as adapter, pytest.raises(errors.AwsRequestFailed, match="Unavailable"):
        adapter.release_address("eipalloc-0abc")
    assert flaky_ec2.actions == ["ReleaseAddress"]
