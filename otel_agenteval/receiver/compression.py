"""Compressed OTLP bodies, inflated with a bound: gzip or deflate over HTTP (``Content-Encoding``),
gzip or deflate over gRPC (per message: grpcio hands the message over as it came, see
:func:`grpc_message`).

The OpenTelemetry Collector's otlp exporter (and so its ``loadbalancing`` exporter) compresses
with gzip by default, so on the usual path every request is inflated here. A gzip body is
inflated whole by libdeflate (the ``deflate`` package, in the serve extra) into a buffer of the
size its trailer states, when that size is within the limit and the body is one gzip member:
two thirds of zlib-ng's CPU, with no growing output buffer to join. Anything else (no or a wrong
stated size, several gzip members, a broken stream) takes the streaming path, bounded as it
inflates, which names what is wrong: zlib-ng when installed (also the serve extra, ~3x the
standard library's zlib), else zlib.
"""

from __future__ import annotations

import zlib
from types import ModuleType
from typing import Any


def _inflater() -> ModuleType:
    try:
        from zlib_ng import zlib_ng  # same API as zlib

        return zlib_ng
    except ImportError:  # installed without the serve extra: the standard library's
        return zlib


def _whole_gunzipper() -> Any:
    try:
        import deflate  # libdeflate: a whole gzip member into a buffer of a given size

        return deflate
    except ImportError:  # installed without the serve extra: the streaming path only
        return None


INFLATER: Any = _inflater()
WHOLE: Any = _whole_gunzipper()
GZIP_MAGIC = b"\x1f\x8b"  # never the start of an OTLP protobuf message (wire type 7 does not exist)
MEMBER_START = GZIP_MAGIC + b"\x08"  # and deflate: how every gzip member begins
MAX_MEMBERS = 1024  # gzip members in one body (a client sends one; Go's reader takes any number): 400 past it
FIRST_SLICE, MAX_SLICE = 256, 1 << 20  # the body fed to the inflater in slices growing from, to


def inflaters() -> str:
    """What inflates gzip here, for the start-up line: ``libdeflate+zlib-ng`` with the serve extra."""
    stream = "zlib-ng" if INFLATER is not zlib else "zlib"
    return stream if WHOLE is None else f"libdeflate+{stream}"


class BadRequest(ValueError):
    """A body that is not an OTLP trace request; the message says why."""


class TooLarge(ValueError):
    """A body (or its inflated form) past the size limit."""


def gunzip(body: bytes, limit: int) -> bytes | bytearray:
    """A gzip body, bounded: past ``limit`` bytes :class:`TooLarge`; truncated or corrupt
    :class:`BadRequest`. Several gzip members (RFC 1952 allows them) are one body, as Go reads it."""
    whole = _whole(body, limit) if WHOLE is not None else None
    return whole if whole is not None else _inflate(body, limit, 16 + zlib.MAX_WBITS, "gzip")


def _whole(body: bytes, limit: int) -> bytearray | None:
    """The body inflated in one call into a buffer of the size its trailer states (ISIZE), or
    None for the streaming path to read (and name what is wrong). libdeflate checks the member's
    CRC and size and never writes past the buffer, so a bomb cannot grow it. It reads one member
    only: a body with ``1f 8b 08`` past its header, as every further member starts, is left to
    the streaming path (so is the odd single member that holds those bytes by chance)."""
    if len(body) < 18:  # 10 bytes of header, 8 of trailer
        return None
    size = int.from_bytes(body[-4:], "little")
    if not 0 < size <= limit or body.find(MEMBER_START, 10) >= 0:  # 0: libdeflate would not read it
        return None
    try:
        out: bytearray = WHOLE.gzip_decompress(body, size)
    except (WHOLE.DeflateError, ValueError):  # ValueError: not gzip at all
        return None
    return out if len(out) == size else None


def inflate(body: bytes, limit: int) -> bytes:
    """A ``Content-Encoding: deflate`` body: the zlib format (RFC 9110; the SDK's OTLP/HTTP
    exporter sends it), or raw deflate, which some clients send under that name."""
    return _inflate(body, limit, zlib.MAX_WBITS if _zlib_header(body) else -zlib.MAX_WBITS, "deflate")


# HTTP ``Content-Encoding`` -> its inflater (identity: none); any other encoding is refused
CONTENT_ENCODINGS = {b"gzip": gunzip, b"deflate": inflate, b"identity": None, b"": None}


def grpc_message(message: bytes, limit: int) -> bytes | bytearray:
    """A gRPC request as its handler gets it with grpcio's own decompression off: gzip or deflate
    (zlib) when the client compressed it, as sent otherwise (small messages go uncompressed
    whatever the channel says). A zlib-looking body that does not inflate is taken as sent."""
    if message.startswith(GZIP_MAGIC):
        return gunzip(message, limit)
    if _zlib_header(message):
        try:
            return _inflate(message, limit, zlib.MAX_WBITS, "deflate")
        except BadRequest:
            return message  # a protobuf message that only looked like zlib (field 15 first)
    return message


def _zlib_header(body: bytes) -> bool:
    """RFC 1950's first two bytes: deflate, a window of at most 32 KiB, and the check bits."""
    return len(body) > 2 and body[0] & 0x0F == 8 and body[0] >> 4 <= 7 and (body[0] << 8 | body[1]) % 31 == 0


def _inflate(body: bytes, limit: int, wbits: int, name: str) -> bytes:
    """Member after member, each fed in growing slices of one view of the body: what zlib copies
    as a member's ``unused_data`` is at most twice that member, so the work is linear in the body
    (feeding it the rest of the body per member was quadratic: 200k empty members, 43 s)."""
    parts: list[bytes] = []
    left = limit + 1
    view = memoryview(body)
    pos, end, members = 0, len(body), 0
    while True:
        members += 1
        if members > MAX_MEMBERS:
            raise BadRequest(f"{name}: more than {MAX_MEMBERS} gzip members in one body")
        d = INFLATER.decompressobj(wbits)
        step = FIRST_SLICE
        while not d.eof:
            if pos >= end:
                raise BadRequest(f"{name}: body is truncated ({name} stream does not end)")
            piece = view[pos:pos + step]
            pos += len(piece)
            step = min(step * 2, MAX_SLICE)
            try:
                out: bytes = d.decompress(piece, left)
            except INFLATER.error as exc:
                raise BadRequest(f"{name}: body is not valid {name} ({exc})") from None
            if out:
                parts.append(out)
                left -= len(out)
            if left <= 0:  # the output bound stopped it: the rest is past the limit
                raise TooLarge(f"{'gunzipped' if name == 'gzip' else 'inflated'} body is larger than {limit} "
                               "bytes (--max-body-bytes)")
        pos -= len(d.unused_data)
        if pos >= end:
            return b"".join(parts) if len(parts) != 1 else parts[0]  # one part: that object, not a copy
        if name != "gzip" or view[pos:pos + 2] != GZIP_MAGIC:
            raise BadRequest(f"{name}: {end - pos} bytes after the end of the {name} stream")
