"""Raw HTTP/1.1 on sockets for the transport tests (`test_http_lean`, `test_http_proxy`,
`test_http_timing`): a reader of the requests on a connection, an accept loop in a
thread, and a self-signed certificate for a TLS server on 127.0.0.1."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import threading
from collections.abc import Callable
from pathlib import Path


class RequestReader:
    """The requests arriving on ``conn``, one at a time: head and ``Content-Length`` body
    (bytes read past one request are kept for the next)."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self._buffer = b""

    def next(self) -> bytes | None:
        """The next whole request, or None once the client has closed the connection."""
        while b"\r\n\r\n" not in self._buffer:
            data = self.conn.recv(65536)
            if not data:
                return None
            self._buffer += data
        head, _, rest = self._buffer.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(rest) < length:
            rest += self.conn.recv(65536)
        self._buffer = rest[length:]
        return head + b"\r\n\r\n" + rest[:length]


def accept_in_background(
    listener: socket.socket, on_connection: Callable[[socket.socket], None]
) -> None:
    """Accept connections on ``listener`` until it is closed, each handled by
    ``on_connection`` in a thread of its own."""

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=on_connection, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, made with cryptography, written
    to ``folder``: (certificate file, key file)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert, private = folder / "cert.pem", folder / "key.pem"
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert, private
