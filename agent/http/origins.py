"""Who may drive the server: the ``Host`` a request names, its ``Origin``, the content type of what
it posts (a browser's reach), and the bearer key (everyone's).

A web page the user visits can send a "simple" cross-site POST (``Content-Type: text/plain``)
with no preflight, and with DNS rebinding it can even read the answer: its own domain resolves
to 127.0.0.1, so the request reaches this server with ``Host: evil.example``. The checks, each a
403 or 415 with OpenAI's error body:

- **Host**: a loopback name (``localhost``, ``127.0.0.1``, ``::1``), any IP literal (a rebinding
  attack always goes through a domain name), or a name the user allows (``--allow-host``; a
  leading dot allows a domain's subdomains). The header is read strictly (:func:`host_name`): a
  bracketed IPv6 address or a name (an IPv4 address is one), then an optional ``:port`` of
  digits; anything else (``[::1]@evil.example``, ``localhost:80:81``) is refused, not read in
  part.
- **Origin**: absent (SDKs, curl), the same origin as the request's host, or one the user allows
  (``--cors-origin``; those also get CORS headers, preflight included, from Starlette's
  ``CORSMiddleware``).
- **Content type**: a POST to the API must say ``application/json``: the one type a foreign page
  cannot send without a preflight.

WebSocket connections get the same Host and Origin checks (a browser lets any page open one to
any server, with its own ``Origin``): refused before they are accepted, which the server answers
with a 403 (the ASGI spec's ``websocket.close`` before ``websocket.accept``).

The chat UI (Gradio, which checks neither ``Host`` nor a foreign ``Origin`` when the ``Host`` is
the page's own: measured on gradio 6.31) runs the same guard without the content-type rule.

The bearer key (:func:`key_refused`, 401) is one check for both servers: the agent's app asks
for it on its routes, vLLM's app through :class:`agent.serve.vllm_server.VllmRequestChecks`.

Example::

    >>> policy = OriginPolicy(allowed_hosts=("factweave.lan",), cors_origins=("http://localhost:3000",))
    >>> app.add_middleware(OriginGuard, policy=policy)   # not run: needs an app   # doctest: +SKIP
"""
from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from agent.errors import FactweaveError

from .errors import ApiError

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
LOOPBACK = "127.0.0.1"
WS_POLICY_VIOLATION = 1008
"""The WebSocket close code of a connection refused by policy (RFC 6455 7.4.1)."""

log = logging.getLogger(__name__)


# A Host header's value (RFC 9110's uri-host [":" port]) as browsers, SDKs and curl send it: a
# bracketed IPv6 address, or a DNS name or IPv4 address (letters, digits, "-", "_", dots), then
# an optional port of digits. Matched whole: what follows a host is a port or nothing.
_HOST = re.compile(r"(?:\[(?P<ipv6>[0-9a-f:.]+)\]|(?P<name>[0-9a-z_-]+(?:\.[0-9a-z_-]+)*\.?))(?::[0-9]{1,5})?")


def host_name(value: str) -> str | None:
    """The host part of a ``Host`` header or an origin's netloc, lowercased, without port or
    brackets (``[::1]:8000`` -> ``::1``); None when ``value`` is not a host with an optional
    port (``[::1]@evil.example``, ``a:1:2``, a bracketed name that is no IPv6 address)."""
    m = _HOST.fullmatch(value.strip().lower())
    if m is None:
        return None
    if m["ipv6"] is not None:
        try:
            return str(ipaddress.IPv6Address(m["ipv6"]))
        except ValueError:
            return None
    return m["name"].rstrip(".")


def allowed_host(value: str) -> str:
    """A name the user allows (``--allow-host``) as :func:`host_name` reads one: a name or IP
    address (IPv6 bare or bracketed), or ``.domain`` for its subdomains; :class:`FactweaveError`
    for anything else."""
    text = value.strip().lower()
    if _is_ip(text):
        return str(ipaddress.ip_address(text))
    name = host_name(text[1:]) if text.startswith(".") else host_name(text)
    if not name:
        raise FactweaveError(f"{value!r} is not a host name to allow (a name, an IP address or .domain)")
    return f".{name}" if text.startswith(".") else name


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _origin(value: str) -> str:
    """``scheme://host[:port]`` of an origin, lowercased (what browsers send, normalised)."""
    parts = urlsplit(value.strip().lower())
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else value.strip().lower()


@dataclass(frozen=True)
class OriginPolicy:
    """The names a request's ``Host`` may give beyond loopback and IP literals, and the origins
    of the web pages that may call the server (CORS)."""

    allowed_hosts: tuple[str, ...] = ()
    cors_origins: tuple[str, ...] = ()

    @classmethod
    def of(cls, allowed_hosts: Iterable[str] = (), cors_origins: Iterable[str] = ()) -> OriginPolicy:
        return cls(tuple(allowed_host(h) for h in allowed_hosts if h.strip()),
                   tuple(_origin(o) for o in cors_origins if o.strip()))

    def host_refused(self, host: str | None) -> str | None:
        """Why a request naming ``host`` is refused, or None."""
        if not host:
            return "a request must name its Host"
        name = host_name(host)
        if name is None:
            return f"the Host {host.strip()[:80]!r} is not a host name with an optional :port"
        if name in LOOPBACK_NAMES or _is_ip(name) or name in self.allowed_hosts:
            return None
        if any(a.startswith(".") and name.endswith(a) for a in self.allowed_hosts):  # ".example.org": its subdomains
            return None
        return (f"Host {name!r} is not served here (loopback names and IP addresses are; "
                "allow a name with --allow-host)")

    def origin_refused(self, origin: str | None, host: str | None) -> str | None:
        """Why a request from a page of ``origin`` is refused, or None (no ``Origin``: not a browser
        page; the page's own origin; an allowed one)."""
        if origin is None:
            return None
        wanted = _origin(origin)
        if wanted in self.cors_origins or "*" in self.cors_origins:
            return None
        netloc = urlsplit(wanted).netloc
        if host and netloc == host.strip().lower():
            return None
        return f"requests from the web page origin {wanted!r} are refused (allow it with --cors-origin)"


def refuse_if_exposed(host: str, api_key: str | None, insecure: bool = False) -> None:
    """A bind beyond loopback without a bearer key is refused (one line) unless ``insecure``:
    anyone who reaches the port could use the model. An empty key is no key."""
    if host in (LOOPBACK, "localhost", "::1") or api_key:
        return
    if not insecure:
        raise FactweaveError(f"serving on {host} without an API key lets anyone who reaches the port use the model: "
                             "set FACTWEAVE_API_KEY (or give --insecure)")
    log.warning("serving on %s without an API key (--insecure): anyone who reaches it can use the model", host)


def key_refused(authorization: str | None, api_key: str | None) -> ApiError | None:
    """The 401 for a request whose ``Authorization`` header does not carry ``api_key`` as its
    bearer token; None when it does or no key is set."""
    if not api_key:
        return None
    scheme, _, token = (authorization or "").partition(" ")
    # Constant-time comparison, so the key cannot be guessed from response timings.
    if scheme.lower() == "bearer" and hmac.compare_digest(token.encode(), api_key.encode()):
        return None
    return ApiError(401, "invalid or missing API key", "authentication_error", code="invalid_api_key",
                         headers={"WWW-Authenticate": "Bearer"})


class OriginGuard:
    """ASGI middleware applying an :class:`OriginPolicy` before anything else reads the request;
    ``json_posts``: a POST must say ``application/json`` (the API; not a UI that uploads files)."""

    def __init__(self, app, policy: OriginPolicy, json_posts: bool = True) -> None:
        self.app, self.policy, self.json_posts = app, policy, json_posts

    async def __call__(self, scope, receive, send) -> None:
        refused = self.refused(scope) if scope["type"] in ("http", "websocket") else None
        if refused is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            # Closed before it is accepted: the server answers the handshake with a 403. A close
            # frame's reason holds 123 bytes at most.
            reason = refused.message.encode()[:123].decode(errors="ignore")
            await send({"type": "websocket.close", "code": WS_POLICY_VIOLATION, "reason": reason})
        else:
            await refuse(send, refused)

    def refused(self, scope) -> ApiError | None:
        """Why the request of ``scope`` is refused (its status, message and code), else None."""
        headers = request_headers(scope)
        host, origin = headers.get("host"), headers.get("origin")
        why = self.policy.host_refused(host) or self.policy.origin_refused(origin, host)
        if why is not None:
            return ApiError(403, why, code="forbidden_origin")
        if self.json_posts and scope.get("method") == "POST":
            media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if media != "application/json":
                return ApiError(415, f"Content-Type must be application/json, not {media or 'none'!r}",
                                     code="unsupported_media_type")
        return None


def request_headers(scope) -> dict[str, str]:
    """An ASGI request's headers by lowercased name."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


async def refuse(send, error: ApiError) -> None:
    """Answer ``error`` with OpenAI's error body (before anything else reads the request)."""
    body = json.dumps(error.body()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               *((name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in error.headers.items())]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
