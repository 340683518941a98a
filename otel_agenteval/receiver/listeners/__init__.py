"""The network edge of ``serve``: the listeners and what bounds their connections.

:mod:`.otlp_http` (OTLP/HTTP ``POST /v1/traces``, an ASGI app) and :mod:`.otlp_grpc`
(``TraceService/Export`` on grpcio) take requests in; :mod:`.ops` serves ``/metrics``,
``/healthz`` and ``/readyz`` on a listener of its own; :mod:`.connections` bounds the HTTP
listeners' connections (a cap, an idle timeout, a deadline on headers); :mod:`.eventloop` picks
uvloop or asyncio under them; :mod:`.counts` binds a listener's series once.

Imports the receiver's lower modules (``config``, ``compression``, ``decoding``, ``memory``,
``durability``, ``pipeline``) and nothing above them; imported by ``receiver/server.py`` alone.
"""
