"""Compressed OTLP bodies, inflated with a bound: gzip or deflate over HTTP (``Content-Encoding``),
gzip or deflate over gRPC (per message: grpcio hands the message over as it came, see
:func:`grpc_message`).

zlib-ng inflates when it is installed (it comes with the serve extra): ~3x zlib's speed on OTLP
bodies. The OpenTelemetry Collector's otlp exporter (and so its ``loadbalancing`` exporter)
compresses with gzip by default, so on the usual path every request is inflated here.
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


INFLATER: Any = _inflater()
GZIP_MAGIC = b"\x1f\x8b"  # never the start of an OTLP protobuf message (wire type 7 does not exist)


class BadRequest(ValueError):
    """A body that is not an OTLP trace request; the message says why."""


class TooLarge(ValueError):
    """A body (or its inflated form) past the size limit."""


def gunzip(body: bytes, limit: int) -> bytes:
    """A gzip body, bounded: past ``limit`` bytes :class:`TooLarge`; truncated or corrupt :class:`BadRequest`."""
    return _inflate(body, limit, 16 + zlib.MAX_WBITS, "gzip")


def inflate(body: bytes, limit: int) -> bytes:
    """A ``Content-Encoding: deflate`` body: the zlib format (RFC 9110; the SDK's OTLP/HTTP
    exporter sends it), or raw deflate, which some clients send under that name."""
    return _inflate(body, limit, zlib.MAX_WBITS if _zlib_header(body) else -zlib.MAX_WBITS, "deflate")


# HTTP ``Content-Encoding`` -> its inflater (identity: none); any other encoding is refused
CONTENT_ENCODINGS = {b"gzip": gunzip, b"deflate": inflate, b"identity": None, b"": None}


def grpc_message(message: bytes, limit: int) -> bytes:
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
    d = INFLATER.decompressobj(wbits)
    try:
        out: bytes = d.decompress(body, limit + 1)
    except INFLATER.error as exc:
        raise BadRequest(f"{name}: body is not valid {name} ({exc})") from None
    if len(out) > limit:
        raise TooLarge(f"{'gunzipped' if name == 'gzip' else 'inflated'} body is larger than {limit} bytes "
                       "(--max-body-bytes)")
    if not d.eof:
        raise BadRequest(f"{name}: body is truncated ({name} stream does not end)")
    return out
