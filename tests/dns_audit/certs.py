"""Certificates trustme will not make: an RSA-1024 leaf (trustme only issues 2048-bit keys), from its own CA."""

from __future__ import annotations

import datetime as dt
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class WeakLeaf:
    ca_pem: bytes
    cert_file: Path
    key_file: Path


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def weak_leaf(directory: Path, host: str, bits: int = 1024) -> WeakLeaf:
    """A CA (2048 bits) and a leaf for `host` with an RSA key of `bits`, written as PEM files under `directory`."""
    now = dt.datetime.now(dt.UTC)
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_cert = (x509.CertificateBuilder().subject_name(_name("weak-key test CA")).issuer_name(_name("weak-key test CA"))
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=30))
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                            crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    # cryptography refuses to generate RSA keys under 1024 bits; 1024 is what this fixture needs
    leaf_key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    leaf = (x509.CertificateBuilder().subject_name(_name(host)).issuer_name(ca_cert.subject)
            .public_key(leaf_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    cert_file, key_file = directory / f"{host}.pem", directory / f"{host}.key"
    cert_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(leaf_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                serialization.NoEncryption()))
    return WeakLeaf(ca_cert.public_bytes(serialization.Encoding.PEM), cert_file, key_file)


def weak_server_context(leaf: WeakLeaf) -> ssl.SSLContext:
    """A server context that may load the weak key (security level 0 on the server side only)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.set_ciphers("DEFAULT:@SECLEVEL=0")
    context.load_cert_chain(str(leaf.cert_file), str(leaf.key_file))
    return context
