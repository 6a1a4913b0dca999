"""Connections that know when the kernel received their bytes, so that a target's
``duration`` and ``first_token_time`` are the network's and not the event loop's.

With many calls in flight one event loop serves every reply; a reply that arrives while
the loop works on another waits, and a clock read when the loop reaches it counts that
wait (about 90 ms at p95 with 64 calls in flight on 2 cores). Linux stamps each
received TCP segment (``SO_TIMESTAMPNS``) and hands the stamp of the last segment read
to ``recvmsg``, so a stream that reads with ``recvmsg`` knows when its bytes arrived
however late it reads them.

`ReceiveTimestampBackend` is an httpcore network backend whose TCP streams
(`TimedStream`, `TimedTLSStream` over it) keep ``sent_ns``, the wall clock (ns) of the
first write of the current request, and ``received_ns``, the kernel's stamp of the last
segment read (the wall clock at the read where the kernel gave none). A request starts
with the first write after a read. `call_times` reads them from an httpx response.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import time
from typing import Any

import httpcore
import httpx
from httpcore._utils import is_socket_readable  # httpcore 1.0: see linear_transport

__all__ = [
    "RECEIVE_STAMP_SPACE",
    "SO_TIMESTAMPNS",
    "ReceiveTimestampBackend",
    "TimedStream",
    "TimedTLSStream",
    "call_times",
    "receive_stamp",
]

#: Linux's ``SO_TIMESTAMPNS`` (and ``SCM_TIMESTAMPNS``); Python's socket module lacks it
SO_TIMESTAMPNS = 35
#: a ``struct timespec``: seconds and nanoseconds, two C longs
_TIMESPEC = struct.Struct("@ll")
#: the ancillary buffer size of a ``recvmsg`` that receives the stamp
RECEIVE_STAMP_SPACE = socket.CMSG_SPACE(_TIMESPEC.size)


def receive_stamp(ancillary: list[tuple[int, int, bytes]]) -> int:
    """The kernel's receive stamp (ns, wall clock) in a ``recvmsg``'s ancillary data, on
    a socket with ``SO_TIMESTAMPNS`` set; the wall clock now where it holds none."""
    for level, kind, value in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            seconds, nanoseconds = _TIMESPEC.unpack_from(value)
            return seconds * 1_000_000_000 + nanoseconds
    return time.time_ns()


class TimedStream(httpcore.AsyncNetworkStream):
    """A non-blocking TCP socket read with ``recvmsg`` (see the module docstring)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sent_ns: int | None = None
        self.received_ns: int | None = None
        self._stamped = True
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        except OSError:  # not Linux: the wall clock at each read stands in
            self._stamped = False
        self._replied = True  # the next write starts a request

    async def _wait(self, writer: bool, timeout: float | None) -> None:
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        fd = self.sock.fileno()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        add, remove = (
            (loop.add_writer, loop.remove_writer)
            if writer
            else (loop.add_reader, loop.remove_reader)
        )
        add(fd, wake)
        try:
            await asyncio.wait_for(ready, timeout)
        finally:
            remove(fd)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        while True:
            try:
                data, ancillary, _, _ = self.sock.recvmsg(max_bytes, RECEIVE_STAMP_SPACE)
            except (BlockingIOError, InterruptedError):
                try:
                    await self._wait(False, timeout)
                except TimeoutError:
                    raise httpcore.ReadTimeout("timed out reading the reply") from None
                continue
            except OSError as exc:
                raise httpcore.ReadError(str(exc) or type(exc).__name__) from exc
            self._replied = True
            if data:  # an end of stream keeps the stamp of the last bytes
                self.received_ns = receive_stamp(ancillary)
            return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if self._replied:
            self._replied = False
            self.sent_ns = time.time_ns()
        view = memoryview(buffer)
        while view:
            try:
                view = view[self.sock.send(view) :]
            except (BlockingIOError, InterruptedError):
                try:
                    await self._wait(True, timeout)
                except TimeoutError:
                    raise httpcore.WriteTimeout("timed out writing the request") from None
            except OSError as exc:
                raise httpcore.WriteError(str(exc) or type(exc).__name__) from exc

    async def aclose(self) -> None:
        self.sock.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        tls = TimedTLSStream(self, ssl_context, server_hostname)
        try:
            await asyncio.wait_for(tls.handshake(), timeout)
        except TimeoutError:
            await self.aclose()
            raise httpcore.ConnectTimeout("timed out in the TLS handshake") from None
        except (ssl.SSLError, OSError, httpcore.ReadError, httpcore.WriteError) as exc:
            await self.aclose()
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        return tls

    def get_extra_info(self, info: str) -> Any:
        if info == "socket":
            return self.sock
        if info == "client_addr":
            return self.sock.getsockname()
        if info == "server_addr":
            return self.sock.getpeername()
        if info == "is_readable":
            return is_socket_readable(self.sock)  # httpcore's own streams' check
        return None


class TimedTLSStream(httpcore.AsyncNetworkStream):
    """TLS over a `TimedStream` through memory buffers. ``received_ns`` is the raw
    stream's (the segments that carried the encrypted bytes); ``sent_ns`` is the wall
    clock of the request's first write of application data after a read, so that the
    handshake's own writes (TLS 1.3's client Finished is the last) and any pause after
    it are not counted. A server that closes the connection without ``close_notify``
    ends the stream, as in httpcore (a body delimited by the connection's end is whole;
    one shorter than its declared length is h11's error). TLS inside it (an HTTPS
    proxy's tunnel) is not offered: httpcore's own ``start_tls`` raises
    NotImplementedError."""

    def __init__(
        self, raw: TimedStream, context: ssl.SSLContext, server_hostname: str | None
    ) -> None:
        self.raw = raw
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self.tls = context.wrap_bio(
            self._incoming, self._outgoing, server_side=False, server_hostname=server_hostname
        )
        self.sent_ns: int | None = None
        self._replied = True  # the next write of application data starts a request

    @property
    def received_ns(self) -> int | None:
        return self.raw.received_ns

    async def _flush(self, timeout: float | None = None) -> None:
        pending = self._outgoing.read()
        if pending:
            await self.raw.write(pending, timeout)

    async def _fill(self, timeout: float | None = None) -> None:
        data = await self.raw.read(65536, timeout)
        if data:
            self._incoming.write(data)
        else:
            self._incoming.write_eof()

    async def handshake(self) -> None:
        while True:
            try:
                self.tls.do_handshake()
                await self._flush()
                return
            except ssl.SSLWantReadError:
                await self._flush()
                await self._fill()

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        while True:
            try:
                data = self.tls.read(max_bytes)
            except ssl.SSLWantReadError:
                await self._flush(timeout)
                await self._fill(timeout)
                continue
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):  # close_notify, or none
                data = b""
            except ssl.SSLError as exc:
                raise httpcore.ReadError(str(exc)) from exc
            self._replied = True
            return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if self._replied and buffer:
            self._replied = False
            self.sent_ns = time.time_ns()
        try:
            self.tls.write(buffer)
        except ssl.SSLError as exc:
            raise httpcore.WriteError(str(exc)) from exc
        await self._flush(timeout)

    async def aclose(self) -> None:
        await self.raw.aclose()

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self.tls
        return self.raw.get_extra_info(info)


class ReceiveTimestampBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network backend of `TimedStream` TCP connections (a Unix socket goes
    to httpcore's own backend, untimed)."""

    def __init__(self) -> None:
        self._untimed = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            return await asyncio.wait_for(
                self._connect(host, port, local_address, socket_options or ()), timeout
            )
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"timed out connecting to {host}:{port}") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc

    async def _connect(
        self, host: str, port: int, local_address: str | None, options: Any
    ) -> TimedStream:
        loop = asyncio.get_running_loop()
        found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        failure: OSError = OSError(f"no address for {host}")
        for family, kind, protocol, _, address in found:
            sock = socket.socket(family, kind, protocol)
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                for option in options:
                    sock.setsockopt(*option)
                if local_address is not None:
                    sock.bind((local_address, 0))
                await loop.sock_connect(sock, address)
            except OSError as exc:
                sock.close()
                failure = exc
                continue
            except BaseException:
                sock.close()
                raise
            return TimedStream(sock)
        raise failure

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.AsyncNetworkStream:
        return await self._untimed.connect_unix_socket(path, timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def call_times(response: httpx.Response) -> tuple[int, int] | None:
    """The wall clock (ns) when the request ``response`` answers began to be written and
    when its last segment read so far arrived; None when its connection is not a timed
    one."""
    stream = response.extensions.get("network_stream")
    sent = getattr(stream, "sent_ns", None)
    received = getattr(stream, "received_ns", None)
    if sent is None or received is None or received < sent:
        return None
    return sent, received
