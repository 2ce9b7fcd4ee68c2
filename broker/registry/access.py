"""Who may call each operation of the registration service, and what it may see: the
tenant model (DESIGN.md section 1, security model; the README's "Security model").

A request's caller is what its tokens prove, checked before the operation runs:

* **anonymous** — no token. May read ``/health``, ``/openapi.json`` and ``/docs``, and
  register (becoming a new subscriber or publisher, whose token the answer returns once),
  under lower limits (:mod:`broker.config`, ``ONYX_ANONYMOUS_*``);
* **subscriber** — ``X-Onyx-Subscriber-Token``: its own profiles, their histories and
  deliveries, its metadata subscriptions, and the archive of the sources it may read
  (public ones and the ones granted to it);
* **owner** — a profile's token (``X-Onyx-Token``): that one profile, as its subscriber may;
* **publisher** — ``X-Onyx-Publisher-Token``: the sources it registered, who may read
  them (grants, public), and their archive;
* **operator** — ``X-Onyx-Admin-Token``: everything. With no operator token configured
  (``ONYX_ADMIN_TOKEN``) no request is an operator's: operator surfaces answer 401.

Any of the tokens may come as ``Authorization: Bearer`` instead. A token no one has is a
401 whatever the operation; a caller of the wrong kind gets 401 (no token) or 403 (a
token of another kind); another tenant's object is a 404, as if it did not exist.

Each operation states its rule with :meth:`Access.allow`, a FastAPI dependency that checks
the caller and returns it; the OpenAPI description carries the rule of every operation
(``x-onyx-access``: ``callers`` and ``sees``) and the security schemes those callers use
(:func:`describe`), and ``tests/broker/test_security_live.py`` holds every operation of
the description to its rule on a running overlay.

>>> Caller(subscriber="s1").roles, Caller().roles, Caller(operator=True).roles
(frozenset({'subscriber'}), frozenset({'anonymous'}), frozenset({'operator'}))
>>> rule = Rule(("subscriber", "operator"), "its own profiles")
>>> rule.admits(Caller(subscriber="s1")), rule.admits(Caller(publisher="p1"))
(True, False)
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Security
from fastapi.routing import APIRoute
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from broker.registry.store import ProfileRecord, Store

SUBSCRIBER_TOKEN_HEADER = "X-Onyx-Subscriber-Token"
PROFILE_TOKEN_HEADER = "X-Onyx-Token"
PUBLISHER_TOKEN_HEADER = "X-Onyx-Publisher-Token"
ADMIN_TOKEN_HEADER = "X-Onyx-Admin-Token"

CALLERS = ("anonymous", "subscriber", "owner", "publisher", "operator")
"""The kinds of caller, in the order the README's table lists them."""

# The security schemes of the OpenAPI description (auto_error off: the service says what is
# missing, in its own words and error body).
_schemes = {
    "SubscriberToken": APIKeyHeader(name=SUBSCRIBER_TOKEN_HEADER, scheme_name="SubscriberToken", auto_error=False,
                                    description="a subscriber's token (POST /subscribers, or the subscriber_token of "
                                                "its first registration)"),
    "ProfileToken": APIKeyHeader(name=PROFILE_TOKEN_HEADER, scheme_name="ProfileToken", auto_error=False,
                                 description="the token POST /profiles (or :batch) returned with the profile"),
    "PublisherToken": APIKeyHeader(name=PUBLISHER_TOKEN_HEADER, scheme_name="PublisherToken", auto_error=False,
                                   description="a publisher's token (POST /publishers, or the publisher_token of its "
                                               "first POST /sources)"),
    "AdminToken": APIKeyHeader(name=ADMIN_TOKEN_HEADER, scheme_name="AdminToken", auto_error=False,
                               description="the operator token the service was started with (ONYX_ADMIN_TOKEN; "
                                           "`onyx up` makes one)"),
    "Bearer": HTTPBearer(scheme_name="Bearer", auto_error=False,
                         description="any of the tokens above as Authorization: Bearer <token>"),
}
SubscriberTokenHeader = Annotated[str | None, Security(_schemes["SubscriberToken"])]
ProfileTokenHeader = Annotated[str | None, Security(_schemes["ProfileToken"])]
PublisherTokenHeader = Annotated[str | None, Security(_schemes["PublisherToken"])]
AdminTokenHeader = Annotated[str | None, Security(_schemes["AdminToken"])]
BearerHeader = Annotated[HTTPAuthorizationCredentials | None, Security(_schemes["Bearer"])]

_SCHEMES_OF = {"subscriber": ("SubscriberToken",), "owner": ("ProfileToken", "SubscriberToken"),
               "publisher": ("PublisherToken",), "operator": ("AdminToken",)}


@dataclass(frozen=True)
class Caller:
    """What a request's tokens proved (several kinds at once when it sent several tokens)."""

    operator: bool = False
    subscriber: str | None = None  # the subscriber's id
    publisher: str | None = None   # the publisher's id
    profile: ProfileRecord | None = None  # the profile whose token came

    @property
    def roles(self) -> frozenset[str]:
        """The kinds of caller this is (``anonymous`` when no token came)."""
        roles = {name for name, has in (("operator", self.operator), ("subscriber", self.subscriber),
                                         ("publisher", self.publisher), ("owner", self.profile)) if has}
        return frozenset(roles or {"anonymous"})

    @property
    def anonymous(self) -> bool:
        return not (self.operator or self.subscriber or self.publisher or self.profile)

    def owns(self, record: ProfileRecord) -> bool:
        """Whether ``record`` is this caller's: its token came, or its subscriber's."""
        return ((self.profile is not None and self.profile.id == record.id)
                or (self.subscriber is not None and record.subscriber_id == self.subscriber))

    @property
    def tenant(self) -> str | None:
        """The subscriber whose objects this caller may see: its own, or its profile's."""
        return self.subscriber or (self.profile.subscriber_id if self.profile else None)


@dataclass(frozen=True)
class Rule:
    """Who may call an operation (kinds of :data:`CALLERS`) and what it sees there."""

    callers: tuple[str, ...]
    sees: str
    tokens: bool = True  # False: an open operation, which does not look at tokens at all

    def admits(self, caller: Caller) -> bool:
        return bool(caller.roles & set(self.callers))

    def openapi(self) -> dict[str, Any]:
        """The ``x-onyx-access`` extension of the operation's description."""
        return {"callers": list(self.callers), "sees": self.sees}

    def security(self) -> list[dict[str, list]]:
        """The operation's OpenAPI security requirements: the schemes its callers use
        (and Bearer), plus none at all when anonymous callers are admitted."""
        if not self.tokens:
            return []
        names = [s for c in self.callers for s in _SCHEMES_OF.get(c, ())]
        out = [{name: []} for name in dict.fromkeys(names)]
        if out:
            out.append({"Bearer": []})
        if "anonymous" in self.callers:
            out.append({})
        return out


def _same(given: str, expected: str) -> bool:
    """Constant-time comparison of two tokens of any characters (a header decoded as
    Latin-1 may hold characters ``hmac.compare_digest`` refuses in a str)."""
    return hmac.compare_digest(hashlib.sha256(given.encode("utf-8", "surrogatepass")).digest(),
                               hashlib.sha256(expected.encode("utf-8", "surrogatepass")).digest())


class Access:
    """Identifies callers and checks their rights (see the module docstring); one per app,
    at ``app.state.access`` (:func:`of`)."""

    def __init__(self, store: Store, authenticate_subscriber, admin_token: str | None) -> None:
        self.store = store
        self._subscriber = authenticate_subscriber  # token -> SubscriberRecord, or raises (401)
        self.admin_token = admin_token

    def identify(self, admin: str | None, subscriber: str | None, publisher: str | None, profile: str | None,
                 bearer: str | None) -> Caller:
        """The caller the tokens prove; 401 for a token no one has."""
        found: dict[str, Any] = {}
        if admin:
            if self.admin_token is None:
                raise HTTPException(401, "the service has no operator token (it was started without "
                                         "ONYX_ADMIN_TOKEN): operator operations are closed")
            if not _same(admin, self.admin_token):
                raise HTTPException(401, f"{ADMIN_TOKEN_HEADER} is not the service's operator token")
            found["operator"] = True
        if subscriber:
            found["subscriber"] = self._subscriber(subscriber).id
        if publisher:
            record = self.store.publisher_by_token(publisher)
            if record is None:
                raise HTTPException(401, f"unknown {PUBLISHER_TOKEN_HEADER}: send the token POST /publishers (or "
                                         "your first POST /sources) returned")
            found["publisher"] = record.id
        if profile:
            record = self.store.profile_by_token(profile)
            if record is None:
                raise HTTPException(401, "no profile has this token (it was never issued, or its profile was "
                                         "deleted): send the token the profile's registration returned")
            found["profile"] = record
        if bearer:
            found.update(self._bearer(bearer))
        return Caller(**found)

    def _bearer(self, token: str) -> dict[str, Any]:
        """What an ``Authorization: Bearer`` token is: the operator's, a subscriber's, a
        publisher's or a profile's (tried in that order); 401 if none."""
        if self.admin_token is not None and _same(token, self.admin_token):
            return {"operator": True}
        subscriber = self.store.subscriber_by_token(token)
        if subscriber is not None:
            return {"subscriber": subscriber.id}
        publisher = self.store.publisher_by_token(token)
        if publisher is not None:
            return {"publisher": publisher.id}
        profile = self.store.profile_by_token(token)
        if profile is not None:
            return {"profile": profile}
        raise HTTPException(401, "the Authorization: Bearer token is no token of this service (operator, "
                                 "subscriber, publisher or profile)")

    def allow(self, *callers: str, sees: str) -> "Allow":
        """The dependency of an operation that ``callers`` may call, seeing ``sees``."""
        unknown = set(callers) - set(CALLERS)
        if unknown:
            raise ValueError(f"unknown kinds of caller {sorted(unknown)}: use {CALLERS}")
        return Allow(self, Rule(tuple(callers), sees))

    @staticmethod
    def public(sees: str) -> "Open":
        """The dependency of an operation anyone may call, seeing ``sees``: its tokens, if
        any, are not even looked at (no database read; ``/health`` answers however busy)."""
        return Open(Rule(CALLERS, sees, tokens=False))

    # -- object-level rules ------------------------------------------------------------------

    def profile(self, caller: Caller, profile_id: str, operator: bool = True) -> ProfileRecord:
        """The profile if ``caller`` owns it (or is an operator, when ``operator``); else 404,
        so that another tenant's profile looks like no profile."""
        record = self.store.profile(profile_id)
        if record is None or not (caller.owns(record) or (operator and caller.operator)):
            raise HTTPException(404, f"no profile {profile_id!r} of yours")
        return record

    def readable(self, caller: Caller) -> set[str] | None:
        """The sources whose archive ``caller`` may read (``None``: every one, an operator)."""
        if caller.operator:
            return None
        out: set[str] = set()
        if caller.tenant is not None:
            out |= self.store.readable_sources(caller.tenant)
        if caller.publisher is not None:
            out |= self.store.owned_sources(caller.publisher)
        return out

    def may_read(self, caller: Caller, source_id: str) -> bool:
        readable = self.readable(caller)
        return readable is None or source_id in readable

    def managed_source(self, caller: Caller, source_id: str) -> None:
        """Return if ``caller`` may say who reads ``source_id`` (its publisher, an operator);
        else 404."""
        access = self.store.source_access(source_id)
        if access is None or not (caller.operator or (caller.publisher is not None
                                                      and access.owner == caller.publisher)):
            raise HTTPException(404, f"no source {source_id!r} of yours")


@dataclass(frozen=True)
class Allow:
    """A FastAPI dependency: the caller of a request, if ``rule`` admits it (401: no token
    where one is needed; 403: a token of a kind the operation does not take)."""

    access: Access = field(repr=False)
    rule: Rule

    def __call__(self, admin: AdminTokenHeader = None, subscriber: SubscriberTokenHeader = None,
                 publisher: PublisherTokenHeader = None, profile: ProfileTokenHeader = None,
                 bearer: BearerHeader = None) -> Caller:
        caller = self.access.identify(admin, subscriber, publisher, profile,
                                      bearer.credentials if bearer is not None else None)
        if self.rule.admits(caller):
            return caller
        needed = " or ".join(_TOKENS[c] for c in self.rule.callers if c in _TOKENS)
        if caller.anonymous:
            raise HTTPException(401, f"this needs {needed} (or the same as Authorization: Bearer)")
        raise HTTPException(403, f"this is for {' or '.join(self.rule.callers)} callers: it needs {needed}")


@dataclass(frozen=True)
class Open:
    """A FastAPI dependency of an operation open to every caller (:meth:`Access.public`)."""

    rule: Rule

    async def __call__(self) -> None:
        return None


_TOKENS = {"subscriber": SUBSCRIBER_TOKEN_HEADER, "owner": f"the profile's {PROFILE_TOKEN_HEADER}",
           "publisher": PUBLISHER_TOKEN_HEADER, "operator": f"the operator's {ADMIN_TOKEN_HEADER}"}


def install(app: FastAPI, access: Access) -> None:
    """Make ``access`` the app's (see :func:`of`)."""
    app.state.access = access


def of(app: FastAPI) -> Access:
    """The :class:`Access` of the registration service ``app``."""
    return app.state.access


def rule_of(route: APIRoute) -> Rule | None:
    """The rule an operation declared (its :class:`Allow` dependency), or ``None``."""
    todo = list(route.dependant.dependencies)
    while todo:
        dep = todo.pop()
        if isinstance(dep.call, (Allow, Open)):
            return dep.call.rule
        todo.extend(dep.dependencies)
    return None


def describe(app: FastAPI, spec: dict[str, Any]) -> None:
    """Write every operation's rule into the description ``spec`` (``x-onyx-access``) and
    its security requirements derived from it; an operation without a rule gets none
    (the authorization test fails on it)."""
    for route in app.routes:
        if not isinstance(route, APIRoute) or not route.include_in_schema:
            continue
        rule = rule_of(route)
        if rule is None:
            continue
        for method in route.methods:
            operation = spec["paths"].get(route.path_format, {}).get(method.lower())
            if operation is not None:
                operation["x-onyx-access"] = rule.openapi()
                operation["security"] = rule.security()
