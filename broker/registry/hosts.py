"""The ``Host`` header check of the registration service (against DNS rebinding).

A web page an operator or subscriber opens can make the browser send requests to
``http://rebind.example:8080/`` and then point ``rebind.example`` at 127.0.0.1: the browser
treats the answers as the page's own (same origin), so the page could use the loopback API
with whatever it may reach there. The request still says ``Host: rebind.example``; the
service answers only requests whose ``Host`` names it (ONYX_ALLOWED_HOSTS; by default the
loopback names and the address it binds to) and refuses the others with 400 and its JSON
error body. ``GET /health`` answers whatever the ``Host``: Kubernetes' probes send the pod's
address, and it tells a page nothing.

>>> allowed_hosts("127.0.0.1")
('localhost', '127.0.0.1', '[::1]')
>>> allowed_hosts("10.0.0.5")
('localhost', '127.0.0.1', '[::1]', '10.0.0.5')
>>> allowed_hosts("0.0.0.0", ["onyx.example.org", "::1"])
('onyx.example.org', '[::1]')
>>> host_name("[::1]:8080"), host_name("LocalHost.:80"), host_name("")
('[::1]', 'localhost', '')
>>> HostCheck(None, ["localhost", "*.onyx.example.org"]).allows("a.onyx.example.org:443")
True
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection, Sequence
from typing import Any

from fastapi.responses import JSONResponse

from broker import config

LOOPBACK = ("localhost", "127.0.0.1", "[::1]")
_ANY_ADDRESS = ("", "0.0.0.0", "::", "[::]")
EXEMPT = ("/health",)


def _bracketed(name: str) -> str:
    """An IPv6 address as a Host header writes it (``[::1]``), anything else as it is."""
    try:
        return f"[{name}]" if ipaddress.ip_address(name).version == 6 else name
    except ValueError:
        return name


def allowed_hosts(bind: str, configured: Sequence[str] | None = config.ALLOWED_HOSTS) -> tuple[str, ...]:
    """The host names a service bound to ``bind`` answers to: ``configured`` (ONYX_ALLOWED_HOSTS),
    else the loopback names and ``bind`` itself when it is one address (not 0.0.0.0 or ::)."""
    names = list(configured) if configured else [*LOOPBACK, *([] if bind in _ANY_ADDRESS else [bind])]
    return tuple(dict.fromkeys(_bracketed(n.strip().lower()) for n in names if n.strip()))


def host_name(header: str) -> str:
    """The host of a ``Host`` header: lower case, without the port and a trailing dot."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[:header.find("]") + 1] if "]" in header else header
    return header.rsplit(":", 1)[0].rstrip(".") if ":" in header else header.rstrip(".")


class HostCheck:
    """Refuses an HTTP request whose ``Host`` names none of ``allowed`` with 400 and a JSON
    ``detail`` (pure ASGI); ``*`` allows any, ``*.example.org`` any name under example.org.
    Requests to the ``exempt`` paths pass whatever their ``Host``."""

    def __init__(self, app: Any, allowed: Sequence[str], exempt: Collection[str] = EXEMPT) -> None:
        self.app, self.exempt = app, frozenset(exempt)
        self.names = frozenset(_bracketed(a.lower()) for a in allowed if not a.startswith("*"))
        self.suffixes = tuple(a[1:].lower() for a in allowed if a.startswith("*."))
        self.any = "*" in allowed

    def allows(self, header: str) -> bool:
        """Whether a request with this ``Host`` header is answered."""
        name = host_name(header)
        return self.any or name in self.names or (bool(name) and name.endswith(self.suffixes))

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"] not in self.exempt:
            header = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
            if not self.allows(header):
                shown = repr(header[:100]) if header else "(none)"
                detail = (f"this service does not answer to the Host {shown}: use one of the names its operator "
                          "configured (ONYX_ALLOWED_HOSTS; by default localhost and the address it listens on)")
                await JSONResponse(status_code=400, content={"detail": detail})(scope, receive, send)
                return
        await self.app(scope, receive, send)
