"""The sandbox's AWS stand-in: moto's server, plus the Elastic IP reverse-DNS API moto lacks.

moto has no ModifyAddressAttribute, DescribeAddressesAttribute or ResetAddressAttribute (a `ptr: true` host
failed against plain moto with ResponseParserError). A WSGI layer in front of moto answers them as AWS documents
them (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_ModifyAddressAttribute.html): the update PENDING
when asked, SUCCESSFUL on the next describe, the record gone after a reset. It does not check the forward A record
as AWS does. Everything else goes to moto unchanged.

Run as `python -m rehearsal.aws_server PORT`; it serves on 127.0.0.1 until SIGTERM or SIGINT.
"""

from __future__ import annotations

import io
import re
import sys
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs
from xml.sax.saxutils import escape

PTR_ACTIONS = {"ModifyAddressAttribute", "DescribeAddressesAttribute", "ResetAddressAttribute"}
XMLNS = "http://ec2.amazonaws.com/doc/2016-11-15/"
REGION_IN_SIGNATURE = re.compile(r"Credential=[^/]+/\d{8}/([a-z0-9-]+)/ec2/")

StartResponse = Callable[[str, list[tuple[str, str]]], Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


class ReverseDnsLayer:
    """Answers the three reverse-DNS actions from its own table; passes every other request to moto."""

    def __init__(self, app: WsgiApp) -> None:
        self.app = app
        self.ptr: dict[str, str] = {}  # allocation id -> the name asked for
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "POST":
            return self.app(environ, start_response)
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        environ["wsgi.input"] = io.BytesIO(body)  # moto reads it again
        form = {key: values[0] for key, values in parse_qs(body.decode("utf-8", "replace")).items()}
        if form.get("Action") not in PTR_ACTIONS:
            return self.app(environ, start_response)
        found = REGION_IN_SIGNATURE.search(environ.get("HTTP_AUTHORIZATION", ""))
        status, xml = self._answer(form, found.group(1) if found else "us-east-1")
        start_response(status, [("Content-Type", "text/xml"), ("Content-Length", str(len(xml)))])
        return [xml]

    def _answer(self, form: dict[str, str], region: str) -> tuple[str, bytes]:
        action = form["Action"]
        if action == "DescribeAddressesAttribute":  # AllocationId.1, .2, ...: one item each
            ids = [value for key, value in sorted(form.items()) if key.startswith("AllocationId.")]
            items = []
            for allocation_id in ids:
                status, one = self._one(action, allocation_id, form, region)
                if not status.startswith("200"):
                    return status, one
                items.append(one.decode())
            return "200 OK", _response(action, f"<addressSet>{''.join(items)}</addressSet>")
        status, one = self._one(action, form.get("AllocationId", ""), form, region)
        if not status.startswith("200"):
            return status, one
        return status, _response(action, f"<address>{one.decode()}</address>")

    def _one(self, action: str, allocation_id: str, form: dict[str, str], region: str) -> tuple[str, bytes]:
        public_ip = _public_ip(region, allocation_id)
        if public_ip is None:
            return "400 Bad Request", _error("InvalidAllocationID.NotFound",
                                             f"The allocation ID '{allocation_id}' does not exist")
        with self.lock:
            if action == "ModifyAddressAttribute":
                self.ptr[allocation_id] = form.get("DomainName", "").rstrip(".")
                inner = _update(self.ptr[allocation_id], "PENDING")
            elif action == "ResetAddressAttribute":
                self.ptr.pop(allocation_id, None)
                inner = ""
            else:
                name = self.ptr.get(allocation_id)
                inner = "" if name is None else f"<ptrRecord>{escape(name)}.</ptrRecord>{_update(name, 'SUCCESSFUL')}"
        address = f"<allocationId>{escape(allocation_id)}</allocationId><publicIp>{public_ip}</publicIp>{inner}"
        return "200 OK", (f"<item>{address}</item>" if action == "DescribeAddressesAttribute" else address).encode()


def _response(action: str, payload: str) -> bytes:
    return (f'<?xml version="1.0" encoding="UTF-8"?><{action}Response xmlns="{XMLNS}">'
            f"<requestId>{uuid.uuid4()}</requestId>{payload}</{action}Response>").encode()


def _update(name: str, status: str) -> str:
    return f"<ptrRecordUpdate><value>{escape(name)}.</value><status>{status}</status></ptrRecordUpdate>"


def _error(code: str, message: str) -> bytes:
    return (f'<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>{code}</Code>'
            f"<Message>{escape(message)}</Message></Error></Errors><RequestID>{uuid.uuid4()}</RequestID>"
            "</Response>").encode()


def _public_ip(region: str, allocation_id: str) -> str | None:
    """The address moto holds under `allocation_id`, or None when it holds none."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    backend = ec2_backends[DEFAULT_ACCOUNT_ID][region]
    for address in backend.addresses:
        if address.allocation_id == allocation_id:
            return str(address.public_ip)
    return None


def serve(port: int) -> None:
    import signal

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", port, ReverseDnsLayer(DomainDispatcherApplication(create_backend_app)),
                         threaded=True)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    signal.signal(signal.SIGINT, lambda *_: threading.Thread(target=server.shutdown).start())
    server.serve_forever()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
