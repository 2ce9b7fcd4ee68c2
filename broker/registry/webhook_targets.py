"""Where a webhook may be POSTed, and a POST that goes exactly there.

A subscriber names the URL, so without care the service would POST wherever it points:
internal hosts (the cloud metadata address, the database, Kafka's admin port) included
(server-side request forgery). Three rules close that:

* **Public addresses only** (:func:`is_public`): besides what ``ipaddress`` calls non-global
  (loopback, private, link-local, shared, reserved) and multicast, every IPv6 form that carries
  an IPv4 address inside is refused, since the network may turn it into that IPv4 address:
  IPv4-mapped ``::ffff:0:0/96``, IPv4-translated ``::ffff:0:0:0/96``, IPv4-compatible ``::/96``
  (``[::127.0.0.1]``), NAT64 ``64:ff9b::/96`` and ``64:ff9b:1::/48``, 6to4 ``2002::/16`` and
  Teredo ``2001::/32``. (A NAT64 prefix an operator chose for their own network cannot be told
  from a public address: such a network needs an egress firewall too.)
* **Resolved once, connected there** (:func:`resolve_checked`, :func:`post`): each POST resolves
  the host once, checks every address, and connects to a checked address; the ``Host`` header,
  and for https the SNI and the certificate check, still use the URL's host name. A name that
  answers a public address to the check and an internal one a moment later (DNS rebinding)
  gains nothing. Redirects are not followed.
* **Quiet refusals**: a refusal names the URL's host, never an address it resolved to, so the
  check cannot be used to map internal names.

>>> check_url("http://[64:ff9b::a9fe:a9fe]/hook")
Traceback (most recent call last):
...
broker.registry.webhook_targets.WebhookRefusedError: webhook host 64:ff9b::a9fe:a9fe resolves to an address that is not public (loopback, private, link-local, multicast, reserved, unspecified, or an IPv6 form with an IPv4 address inside: IPv4-mapped or -compatible, NAT64, 6to4, Teredo): give a public URL (an operator may allow such addresses with ONYX_WEBHOOK_ALLOW_PRIVATE)
"""

from __future__ import annotations

import functools
import http.client
import ipaddress
import socket
import ssl
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from broker import config

Resolve = Callable[[str, int], Sequence[str]]
"""A host name and port -> the addresses to connect to (:func:`system_resolve`; tests give their own)."""

_EMBEDDED_IPV4 = tuple(ipaddress.ip_network(n) for n in (
    "::ffff:0:0/96",    # IPv4-mapped (RFC 4291): the kernel connects to the IPv4 address
    "::ffff:0:0:0/96",  # IPv4-translated (SIIT, RFC 7915)
    "::/96",            # IPv4-compatible (RFC 4291, deprecated); :: and ::1 too
    "64:ff9b::/96",     # NAT64 well-known prefix (RFC 6052)
    "64:ff9b:1::/48",   # NAT64 local-use prefix (RFC 8215)
    "2002::/16",        # 6to4 (RFC 3056): the next 32 bits are an IPv4 address
    "2001::/32",        # Teredo (RFC 4380): the server's and the client's IPv4 address
))


class WebhookRefusedError(ValueError):
    """A webhook URL the service will not POST to; the message says why and what to do."""


class PostFailed(Exception):
    """The receiver answered, with a status other than 2xx."""


@dataclass(frozen=True)
class Target:
    """A webhook URL whose host was resolved and checked: POST to ``addresses`` only."""

    scheme: str
    host: str
    port: int
    path: str
    addresses: tuple[str, ...]


def is_public(address: str) -> bool:
    """Whether the service may connect to ``address`` (a zone id, ``%eth0``, is ignored).

    >>> [is_public(a) for a in ("93.184.215.14", "2606:4700::6810:85e5")]
    [True, True]
    >>> [is_public(a) for a in ("0.0.0.0", "::127.0.0.1", "::ffff:10.0.0.1", "2002:a9fe:a9fe::1", "fe80::1%eth0")]
    [False, False, False, False, False]
    """
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    return (ip.is_global and not ip.is_multicast and not ip.is_unspecified
            and not any(ip in network for network in _EMBEDDED_IPV4))


def system_resolve(host: str, port: int) -> list[str]:
    """The addresses ``getaddrinfo`` gives for ``host`` (each once, in its order)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


def resolve_checked(url: str, allow_private: bool = config.WEBHOOK_ALLOW_PRIVATE,
                    resolve: Resolve = system_resolve) -> Target:
    """``url`` resolved once and checked: a :class:`Target`, else :class:`WebhookRefusedError`.

    >>> resolve_checked("https://hooks.example.org/onyx?k=1", resolve=lambda host, port: ["93.184.215.14"])
    Target(scheme='https', host='hooks.example.org', port=443, path='/onyx?k=1', addresses=('93.184.215.14',))
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WebhookRefusedError(f"a webhook URL is http:// or https://, not {url!r}")
    if parts.username or parts.password:
        raise WebhookRefusedError("a webhook URL carries no user or password: the signature authenticates the POST")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        addresses = tuple(resolve(parts.hostname, port))
        public = [is_public(a) for a in addresses]  # and each is numeric: connecting looks nothing up
    except (OSError, UnicodeError, ValueError) as exc:
        raise WebhookRefusedError(f"webhook host {parts.hostname} does not resolve ({exc}): give a URL whose "
                                  "host the service can reach") from None
    if not addresses:
        raise WebhookRefusedError(f"webhook host {parts.hostname} resolves to no address: give a URL whose host "
                                  "the service can reach")
    if not allow_private and not all(public):
        raise WebhookRefusedError(
            f"webhook host {parts.hostname} resolves to an address that is not public (loopback, private, "
            "link-local, multicast, reserved, unspecified, or an IPv6 form with an IPv4 address inside: "
            "IPv4-mapped or -compatible, NAT64, 6to4, Teredo): give a public URL (an operator may allow such "
            "addresses with ONYX_WEBHOOK_ALLOW_PRIVATE)")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(parts.scheme, parts.hostname, port, path, addresses)


def check_url(url: str, allow_private: bool = config.WEBHOOK_ALLOW_PRIVATE, resolve: Resolve = system_resolve) -> None:
    """Return if the service may POST to ``url``, else :class:`WebhookRefusedError` (at registration;
    each POST checks again, as a name may resolve elsewhere later).

    >>> check_url("ftp://example.org/x")
    Traceback (most recent call last):
    ...
    broker.registry.webhook_targets.WebhookRefusedError: a webhook URL is http:// or https://, not 'ftp://example.org/x'
    >>> check_url("http://hooks.example.org/x", resolve=lambda host, port: ["93.184.215.14", "10.0.0.7"])
    Traceback (most recent call last):
    ...
    broker.registry.webhook_targets.WebhookRefusedError: webhook host hooks.example.org resolves to an address that is not public (...): give a public URL (an operator may allow such addresses with ONYX_WEBHOOK_ALLOW_PRIVATE)
    >>> check_url("http://127.0.0.1:9/hook", allow_private=True)
    """
    resolve_checked(url, allow_private, resolve)


def _connect(target: Target, timeout: float) -> socket.socket:
    """A TCP connection to one of the target's checked addresses (the next if one refuses)."""
    last: OSError | None = None
    for address in target.addresses:
        try:
            return socket.create_connection((address, target.port), timeout)  # numeric: no lookup
        except OSError as exc:
            last = exc
    assert last is not None  # resolve_checked never gives a target without an address
    raise last


class _PinnedHTTP(http.client.HTTPConnection):
    """Plain HTTP to the target's checked address; ``Host`` is the URL's host."""

    def __init__(self, target: Target, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self.target = target

    def connect(self) -> None:
        self.sock = _connect(self.target, self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """TLS to the target's checked address; SNI and the certificate check use the URL's host."""

    def __init__(self, target: Target, timeout: float, tls: ssl.SSLContext) -> None:
        super().__init__(target.host, target.port, timeout=timeout, context=tls)
        self.target, self.tls = target, tls

    def connect(self) -> None:
        self.sock = self.tls.wrap_socket(_connect(self.target, self.timeout), server_hostname=self.host)


@functools.cache
def default_tls() -> ssl.SSLContext:
    """The system's trusted CAs, host names checked (``SSL_CERT_FILE`` chooses other CAs)."""
    return ssl.create_default_context()


def post(target: Target, body: bytes, headers: dict[str, str], timeout: float,
         tls: ssl.SSLContext | None = None) -> None:
    """POST ``body`` to ``target`` (to its checked addresses only); :class:`PostFailed` on an answer
    other than 2xx (a redirect included: it is not followed), ``OSError`` or
    ``http.client.HTTPException`` when there is no proper answer within ``timeout`` seconds (a
    bound on each connect, send and read)."""
    connection = (_PinnedHTTPS(target, timeout, tls or default_tls()) if target.scheme == "https"
                  else _PinnedHTTP(target, timeout))
    try:
        connection.request("POST", target.path, body, headers)
        answer = connection.getresponse()
        if not 200 <= answer.status < 300:
            raise PostFailed(f"HTTP {answer.status} {answer.reason}")
    finally:
        connection.close()
