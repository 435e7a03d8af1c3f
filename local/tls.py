"""A throwaway certificate authority and server certificate for local HTTPS with HTTP/2.

The SageMaker client only negotiates HTTP/2 (and so full duplex) over TLS, and it hangs
silently on a certificate it does not trust. So the stand-in serves a certificate signed by a
CA made on the spot, and the client is told to trust that CA file explicitly
(`SAGEMAKER_CA_FILE`); the system trust store is never touched.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_FILE = "ca.pem"
CERT_FILE = "server.pem"
KEY_FILE = "server-key.pem"

_VALIDITY = datetime.timedelta(days=2)
# Clocks of a laptop and a container may disagree a little; a certificate "not yet valid"
# fails the handshake as silently as an untrusted one.
_BACKDATE = datetime.timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """PEM files of one throwaway PKI: the CA to trust, and the server's chain and key."""

    ca_path: Path
    cert_path: Path
    key_path: Path


@dataclass(frozen=True, slots=True)
class TlsMaterial:
    """The same PKI in memory (PEM bytes), before it is written anywhere."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "voicestack local"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _subject_alt_names(hosts: tuple[str, ...]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def generate_tls_material(
    hosts: tuple[str, ...] = ("127.0.0.1", "localhost"), *, now: datetime.datetime | None = None
) -> TlsMaterial:
    """A new CA (P-256) and a server certificate it signs, valid for `hosts` (IPs or DNS names)."""
    if not hosts:
        raise ValueError("at least one host name or IP address is required for the server certificate")
    issued = (now or datetime.datetime.now(datetime.UTC)) - _BACKDATE
    expires = issued + _VALIDITY

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("voicestack throwaway CA")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(issued)
        .not_valid_after(expires)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(issued)
        .not_valid_after(expires)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_subject_alt_names(hosts), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )

    return TlsMaterial(
        ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM),
        cert_pem=server_cert.public_bytes(serialization.Encoding.PEM),
        key_pem=server_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


def write_tls_files(material: TlsMaterial, cert_dir: Path) -> TlsFiles:
    """Write the PKI into `cert_dir` (created if missing); the private key is readable by the owner only."""
    cert_dir.mkdir(parents=True, exist_ok=True)
    files = TlsFiles(ca_path=cert_dir / CA_FILE, cert_path=cert_dir / CERT_FILE, key_path=cert_dir / KEY_FILE)
    files.ca_path.write_bytes(material.ca_pem)
    files.cert_path.write_bytes(material.cert_pem)
    files.key_path.touch(mode=0o600, exist_ok=True)
    files.key_path.chmod(0o600)
    files.key_path.write_bytes(material.key_pem)
    return files
