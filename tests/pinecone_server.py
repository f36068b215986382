"""A small local server that speaks the part of Pinecone's REST API that factweave uses.

The hosted Pinecone service cannot be reached from the test machines and Pinecone Local is
end-of-life, so the tests run the real ``pinecone`` SDK against this server instead. It is a
real HTTP server (stdlib ``http.server`` in a thread, bound to 127.0.0.1 on a free port) and
holds one cosine index in memory:

* control plane: ``GET /indexes/{name}`` (the describe call ``pc.index(name=...)`` makes),
  answering with this server's own URL as the index host;
* data plane: ``POST /vectors/upsert``, ``POST /query``, ``GET /vectors/fetch``,
  ``POST /vectors/delete``, ``POST /describe_index_stats``.

Request and response bodies follow the shapes the SDK (v10) sends and validates: camelCase
keys (``topK``, ``includeMetadata``, ``upsertedCount``, ``vectorCount``...), errors as
``{"error": {"code", "message"}, "status"}``. Every request must carry the ``Api-Key``
header. Namespaces and Pinecone's metadata filter operators are supported (the filter is
evaluated by :func:`agent.web.vector_filters.matches_filter`, the same semantics as the local index).

:meth:`PineconeTestServer.fail_next` makes the next N requests fail with 429 or 503, to test
retries; :attr:`PineconeTestServer.requests` records ``(method, path)`` of every request.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import numpy as np

from agent.errors import FactweaveError
from agent.web.vector_filters import check_filter, matches_filter

_REASONS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND",
            429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}


class _RequestError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class PineconeTestServer:
    """One in-memory Pinecone index served over HTTP on 127.0.0.1.

    Example::

        server = PineconeTestServer(api_key="test-key", dimension=8).start()
        pc = Pinecone(api_key="test-key", host=server.url)
        index = pc.index(name=server.index_name)
        ...
        server.stop()
    """

    def __init__(self, api_key: str, index_name: str = "factweave-test", dimension: int = 8) -> None:
        self.api_key = api_key
        self.index_name = index_name
        self.dimension = dimension
        self.namespaces: dict[str, dict[str, tuple[list[float], dict[str, Any]]]] = {}
        self.requests: list[tuple[str, str]] = []
        self._failures: list[tuple[int, str | None]] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle and test controls -----------------------------------------------------------

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("server not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> PineconeTestServer:
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="pinecone-test-server",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def reset(self, dimension: int | None = None) -> None:
        """Forget all records, pending failures and the request log."""
        with self._lock:
            self.namespaces.clear()
            self.requests.clear()
            self._failures.clear()
            if dimension is not None:
                self.dimension = dimension

    def fail_next(self, count: int, status: int = 503, retry_after: str | None = "0") -> None:
        """Answer the next ``count`` requests with ``status`` (and a Retry-After header, which the
        SDK honours; "0" keeps the tests fast)."""
        with self._lock:
            self._failures.extend([(status, retry_after)] * count)

    # -- request handling ----------------------------------------------------------------------

    def handle(self, method: str, path: str, query: dict[str, list[str]], headers, body: Any) -> tuple[int, Any, dict]:
        with self._lock:
            self.requests.append((method, path))
            if self._failures:
                status, retry_after = self._failures.pop(0)
                extra = {"Retry-After": retry_after} if retry_after is not None else {}
                return status, _error(status, "injected failure"), extra
        if headers.get("Api-Key") != self.api_key:
            return 401, _error(401, "Invalid API Key"), {}
        try:
            with self._lock:
                return 200, self._route(method, path, query, body), {}
        except _RequestError as error:
            return error.status, _error(error.status, str(error)), {}

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> Any:
        if method == "GET" and path.startswith("/indexes/"):
            return self._describe_index(unquote(path[len("/indexes/"):]))
        routes = {("POST", "/vectors/upsert"): self._upsert, ("POST", "/query"): self._query,
                  ("POST", "/vectors/delete"): self._delete,
                  ("POST", "/describe_index_stats"): self._stats}
        if method == "GET" and path == "/vectors/fetch":
            return self._fetch(query)
        action = routes.get((method, path))
        if action is None:
            raise _RequestError(404, f"no route {method} {path}")
        if not isinstance(body, dict):
            raise _RequestError(400, "the body must be a JSON object")
        return action(body)

    def _describe_index(self, name: str) -> dict:
        if name != self.index_name:
            raise _RequestError(404, f"Resource {name} not found")
        return {"name": name, "host": self.url, "deletion_protection": "disabled",
                "status": {"ready": True, "state": "Ready"},
                "schema": {"fields": {"values": {"type": "dense_vector", "dimension": self.dimension,
                                                 "metric": "cosine"}}},
                "deployment": {"deployment_type": "managed", "cloud": "aws", "region": "us-east-1"}}

    def _vector(self, values: Any) -> list[float]:
        if not isinstance(values, list) or len(values) != self.dimension:
            size = len(values) if isinstance(values, list) else type(values).__name__
            raise _RequestError(400, f"Vector dimension {size} does not match the dimension of the index {self.dimension}")
        return [float(value) for value in values]

    def _upsert(self, body: dict) -> dict:
        vectors = body.get("vectors")
        if not isinstance(vectors, list) or not vectors:
            raise _RequestError(400, "vectors must be a non-empty list")
        if len(vectors) > 1000:
            raise _RequestError(400, "at most 1000 vectors per upsert request")
        space = self.namespaces.setdefault(body.get("namespace", ""), {})
        staged = []
        for record in vectors:
            if not isinstance(record, dict) or not isinstance(record.get("id"), str) or not record["id"]:
                raise _RequestError(400, "each vector needs a non-empty string id")
            metadata = record.get("metadata") or {}
            if not isinstance(metadata, dict):
                raise _RequestError(400, "metadata must be an object")
            staged.append((record["id"], self._vector(record.get("values")), metadata))
        for item, values, metadata in staged:  # all or nothing, as one request is on Pinecone
            space[item] = (values, metadata)
        return {"upsertedCount": len(staged)}

    def _query(self, body: dict) -> dict:
        top_k = body.get("topK")
        if not isinstance(top_k, int) or not 1 <= top_k <= 10000:
            raise _RequestError(400, "topK must be an integer from 1 to 10000")
        query = np.asarray(self._vector(body.get("vector")), dtype=np.float64)
        try:
            flt = check_filter(body.get("filter"))
        except FactweaveError as error:
            raise _RequestError(400, f"Invalid filter: {error}") from None
        namespace = body.get("namespace", "")
        space = self.namespaces.get(namespace, {})
        scored = []
        for item, (values, metadata) in space.items():
            if matches_filter(metadata, flt):
                vector = np.asarray(values, dtype=np.float64)
                score = float(vector @ query / (np.linalg.norm(vector) * np.linalg.norm(query) or 1.0))
                scored.append((score, item))
        scored.sort(key=lambda pair: (-pair[0], pair[1]))
        matches = []
        for score, item in scored[:top_k]:
            values, metadata = space[item]
            match: dict[str, Any] = {"id": item, "score": score,
                                     "values": values if body.get("includeValues") else []}
            if body.get("includeMetadata") and metadata:
                match["metadata"] = metadata
            matches.append(match)
        return {"matches": matches, "namespace": namespace, "usage": {"readUnits": 1}}

    def _fetch(self, query: dict[str, list[str]]) -> dict:
        namespace = query.get("namespace", [""])[0]
        space = self.namespaces.get(namespace, {})
        vectors = {}
        for item in query.get("ids", []):
            if item in space:
                values, metadata = space[item]
                vectors[item] = {"id": item, "values": values, **({"metadata": metadata} if metadata else {})}
        return {"vectors": vectors, "namespace": namespace, "usage": {"readUnits": 1}}

    def _delete(self, body: dict) -> dict:
        space = self.namespaces.get(body.get("namespace", ""), {})
        if body.get("deleteAll"):
            space.clear()
        for item in body.get("ids") or []:
            space.pop(item, None)
        if body.get("filter"):
            flt = check_filter(body["filter"])
            for item in [item for item, (_, metadata) in space.items() if matches_filter(metadata, flt)]:
                del space[item]
        return {}

    def _stats(self, body: dict) -> dict:
        counts = {name: len(space) for name, space in self.namespaces.items() if space}
        return {"namespaces": {name: {"vectorCount": count} for name, count in counts.items()},
                "dimension": self.dimension, "indexFullness": 0.0,
                "totalVectorCount": sum(counts.values()), "metric": "cosine", "vectorType": "dense"}


def _error(status: int, message: str) -> dict:
    return {"error": {"code": _REASONS.get(status, "UNKNOWN"), "message": message}, "status": status}


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that drops a kept-alive connection (the SDK after a retryable error) is normal.
        pass


class _Handler(BaseHTTPRequestHandler):
    owner: PineconeTestServer
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDK's connection pool expects

    def _serve(self, method: str) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            status, payload, extra = 400, _error(400, "the body is not valid JSON"), {}
        else:
            status, payload, extra = self.owner.handle(method, parts.path, parse_qs(parts.query),
                                                       self.headers, body)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def log_message(self, format: str, *args: Any) -> None:
        pass
