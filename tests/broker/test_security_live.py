"""Every operation of the OpenAPI description, tried against its own rule on a real `onyx up`
(``onyx up --detach`` in a process of its own: Kafka, the Spark brokers, the archive writer and
the registration service, as a user runs them).

The world: an operator; a publisher owning source ``secsrc``; the overlay's own source ``news``
(the operator's); subscriber A, granted both sources, with profiles; subscriber B with profiles
and no grant; messages published to both sources and archived. Then, for each operation the
service describes (``/openapi.json``, read at run time), each kind of caller:

* **anonymous** — no token: 401 unless the rule (``x-onyx-access``) admits anonymous callers;
* **a token of another kind** than the rule admits: 403 (the operator's token counts too);
* **subscriber B against A's objects** (a profile, a metadata subscription, a source it was not
  granted, a message of such a source): 404, as if they did not exist; listings leave A's out;
* **the rightful caller** (A on its own objects, the publisher on its source, the operator):
  answered (2xx), so a rule that shuts out everyone fails too.

An operation the description gains without a rule, or without a case here, fails
:func:`test_every_operation_has_a_rule_and_a_case`: a new door needs a lock and a test of it.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Producer

from broker.registry.access import CALLERS
from tests.broker.test_cli_overlay import onyx

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

ADMIN = "security-test-operator-" + uuid.uuid4().hex
NEWS = "news"  # the overlay's own source (the operator's, not public)


@dataclass
class World:
    """The tenants and objects the cases are tried on."""

    api: str
    bootstrap: str
    operator: dict[str, str]
    publisher: dict[str, str]
    a: dict[str, str]          # subscriber A's token header
    b: dict[str, str]          # subscriber B's
    a_id: str = ""
    b_id: str = ""
    a_profile: dict = field(default_factory=dict)   # POST /profiles' answer
    b_profile: dict = field(default_factory=dict)
    a_subscription: str = ""
    b_subscription: str = ""
    a_message: str = ""        # an archived message of secsrc (A may read it, B may not)
    news_message: str = ""
    spec: dict = field(default_factory=dict)

    def call(self, method: str, path: str, headers: dict[str, str] | None = None, body=None,
             stream: bool = False) -> httpx.Response:
        with httpx.Client(base_url=self.api, timeout=60) as client:
            if stream:  # an endless event stream: its status and headers are the answer
                with client.stream(method, path, headers=headers or {}, timeout=10) as response:
                    return response
            return client.request(method, path, headers=headers or {}, json=body)

    def ok(self, method: str, path: str, headers: dict[str, str] | None = None, body=None) -> dict | list | None:
        response = self.call(method, path, headers, body)
        assert response.status_code < 300, f"{method} {path}: {response.status_code} {response.text[:300]}"
        return response.json() if response.content and "json" in response.headers.get("content-type", "") else None

    def profile(self, headers: dict[str, str], text: str = "/nitf/head/title") -> dict:
        return self.ok("POST", "/profiles", headers, {"text": text})


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    run_dir = tmp_path_factory.mktemp("security-run")
    env = {**os.environ, "ONYX_RUN_DIR": str(run_dir), "ONYX_ADMIN_TOKEN": ADMIN, "PYTHONUNBUFFERED": "1"}
    onyx(env, "up", "--detach", "--timeout", "400", timeout=450)
    try:
        info = json.loads((Path(run_dir) / "cluster.json").read_text())
        yield _build(info["api_url"], info["bootstrap_servers"])
    finally:
        onyx(env, "down", timeout=200)


def _build(api: str, bootstrap: str) -> World:
    operator = {"X-Onyx-Admin-Token": ADMIN}
    w = World(api, bootstrap, operator, {}, {}, {})
    pub = w.ok("POST", "/publishers", operator)
    w.publisher = {"X-Onyx-Publisher-Token": pub["token"]}
    w.ok("POST", "/sources", w.publisher, {"name": "secsrc"})
    for who in ("a", "b"):
        sub = w.ok("POST", "/subscribers")
        setattr(w, who, {"X-Onyx-Subscriber-Token": sub["token"]})
        setattr(w, f"{who}_id", sub["subscriber_id"])
    w.a_profile, w.b_profile = w.profile(w.a), w.profile(w.b)
    w.ok("PUT", f"/sources/secsrc/grants/{w.a_id}", w.publisher)
    w.ok("PUT", f"/sources/{NEWS}/grants/{w.a_id}", operator)
    rule = "search Source s register s"
    w.a_subscription = w.ok("POST", "/metadata/subscriptions", w.a, {"rule": rule})["subscription_id"]
    w.b_subscription = w.ok("POST", "/metadata/subscriptions", w.b, {"rule": rule})["subscription_id"]
    # Messages to both sources, archived.
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    ids = {"secsrc": f"sec-{uuid.uuid4().hex[:8]}", NEWS: f"news-{uuid.uuid4().hex[:8]}"}
    for source, mid in ids.items():
        producer.produce(f"onyx.src.{source}", b"<nitf><head><title>t</title></head></nitf>", mid.encode(),
                         headers=[("onyx-message-id", mid.encode())])
    assert producer.flush(30) == 0
    w.a_message, w.news_message = ids["secsrc"], ids[NEWS]
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        listed = w.ok("GET", f"/archive/messages?at={int(time.time() * 1000) + 60_000}", operator)
        if set(ids.values()) <= {m["message_id"] for m in listed["messages"]}:
            break
        time.sleep(1)
    else:
        raise AssertionError("the archive writer did not archive the test messages")
    w.spec = w.ok("GET", "/openapi.json")
    return w


# -- the cases: how to ask each operation about A's objects, as some caller -----------------------


@dataclass(frozen=True)
class Case:
    """How to call one operation on A's objects: ``path`` (with A's ids filled in) and
    ``body``; ``fresh`` builds them anew for each call when the call changes what it names
    (a deletion); ``stream``: an endless event stream; ``listing``: for B, the answer is
    200 without A's objects (``hides`` says B's answer must not contain this text)."""

    path: Callable[[World], str]
    body: Callable[[World], object] | None = None
    fresh: Callable[[World, dict[str, str]], tuple[str, object]] | None = None
    stream: bool = False
    hides: Callable[[World], str] | None = None


def _pid(w: World) -> str:
    return w.a_profile["profile_id"]


def _deletable(w: World, owner: dict[str, str]) -> tuple[str, object]:
    """A new profile of A to delete (its path and no body)."""
    return f"/profiles/{w.profile(owner)['profile_id']}", None


def _window() -> dict:
    now = int(time.time() * 1000)
    return {"from": now - 3_600_000, "to": now + 60_000}


CASES: dict[str, Case] = {
    "health": Case(lambda w: "/health"),
    "register_publisher": Case(lambda w: "/publishers"),
    "register_source": Case(lambda w: "/sources", lambda w: {"name": f"src-{uuid.uuid4().hex[:8]}"}),
    "list_sources": Case(lambda w: "/sources", hides=lambda w: '"secsrc"'),
    "update_source": Case(lambda w: "/sources/secsrc", lambda w: {"public": False}),
    "source_grants": Case(lambda w: "/sources/secsrc/grants"),
    "grant_source": Case(lambda w: f"/sources/secsrc/grants/{w.a_id}"),
    "revoke_source": Case(lambda w: f"/sources/secsrc/grants/{w.b_id}"),
    "register_subscriber": Case(lambda w: "/subscribers"),
    "register_profile": Case(lambda w: "/profiles", lambda w: {"text": "/nitf"}),
    "register_profiles": Case(lambda w: "/profiles:batch", lambda w: {"profiles": [{"text": "/nitf"}]}),
    "get_profile": Case(lambda w: f"/profiles/{_pid(w)}"),
    "update_profile": Case(lambda w: f"/profiles/{_pid(w)}", lambda w: {"text": "/nitf/head/title"}),
    "delete_profile": Case(lambda w: "", fresh=_deletable),
    "change_profiles": Case(lambda w: "/profiles:changes",
                            lambda w: {"changes": [{"op": "update", "profile_id": _pid(w), "text": "/nitf/head"}]}),
    "rebalance": Case(lambda w: "/rebalance"),
    "list_brokers": Case(lambda w: "/brokers", hides=lambda w: '"secsrc"'),
    "subscribe_metadata": Case(lambda w: "/metadata/subscriptions",
                               lambda w: {"rule": "search Source s register s"}),
    "unsubscribe_metadata": Case(lambda w: "", fresh=lambda w, owner: (
        f"/metadata/subscriptions/{w.ok('POST', '/metadata/subscriptions', owner, {'rule': 'search Source s register s'})['subscription_id']}",
        None)),
    "replay": Case(lambda w: "/replay", lambda w: {"profile_id": _pid(w), "source": "secsrc", **_window()}),
    "archive_messages": Case(lambda w: f"/archive/messages?at={int(time.time() * 1000) + 60_000}",
                             hides=lambda w: w.a_message),
    "archive_message": Case(lambda w: f"/archive/messages/{w.a_message}"),
    "archive_recipients": Case(lambda w: f"/archive/messages/{w.a_message}/recipients"),
    "profile_history": Case(lambda w: f"/profiles/{_pid(w)}/history"),
    "delivered_message": Case(lambda w: f"/profiles/{_pid(w)}/messages/{w.a_message}"),
    "source_history": Case(lambda w: "/sources/secsrc/history"),
    "archive_profiles": Case(lambda w: f"/archive/profiles?at={int(time.time() * 1000) + 60_000}",
                             hides=lambda w: _pid(w)),
    "backfill_profile": Case(lambda w: f"/profiles/{_pid(w)}/backfill",
                             lambda w: {"since": int(time.time() * 1000) - 60_000, "timeout_s": 5}),
    "query": Case(lambda w: "/queries", lambda w: {"source": "secsrc", "query": "/nitf/head[title]", **_window()}),
    "cache": Case(lambda w: "/cache"),
    "profile_deliveries": Case(lambda w: f"/profiles/{_pid(w)}/deliveries", stream=True),
    "console_overlay": Case(lambda w: "/console/overlay"),
    "console_figures": Case(lambda w: "/console/figures"),
    "console_events": Case(lambda w: "/console/events", stream=True),
    "console_dead_letters": Case(lambda w: "/console/dead-letters"),
    "console_profiles": Case(lambda w: "/console/profiles"),
    "metrics": Case(lambda w: "/metrics"),
}
"""One case per operation id of the description."""


def operations(spec: dict) -> list[tuple[str, str, dict]]:
    """(method, path, operation) of every operation the description has."""
    return [(method.upper(), path, op) for path, ops in spec["paths"].items() for method, op in ops.items()]


def _headers(w: World, kind: str) -> dict[str, str]:
    """A token of ``kind``: subscriber A's, A's profile's, the publisher's, the operator's."""
    return {"subscriber": w.a, "owner": {"X-Onyx-Token": w.a_profile["token"]}, "publisher": w.publisher,
            "operator": w.operator, "anonymous": {}}[kind]


def _ask(w: World, method: str, case: Case, headers: dict[str, str], owner: dict[str, str]) -> httpx.Response:
    """The operation's request for A's objects (made anew by ``owner`` when it consumes them)."""
    if case.fresh is not None:
        path, body = case.fresh(w, owner)
    else:
        path, body = case.path(w), case.body(w) if case.body else None
    return w.call(method, path, headers, body, stream=case.stream)


def test_every_operation_has_a_rule_and_a_case(world):
    """Each operation says who may call it and what it sees, and this module tries it."""
    missing_rule = [op.get("operationId") for _, _, op in operations(world.spec) if "x-onyx-access" not in op]
    assert missing_rule == [], f"operations without x-onyx-access: {missing_rule}"
    missing_case = [op["operationId"] for _, _, op in operations(world.spec) if op["operationId"] not in CASES]
    assert missing_case == [], f"operations the security test does not try: {missing_case}"
    for _, _, op in operations(world.spec):
        rule = op["x-onyx-access"]
        assert set(rule["callers"]) <= set(CALLERS) and rule["sees"], op["operationId"]


def _cases(world: World) -> list[tuple[str, str, str, Case, list[str]]]:
    return [(op["operationId"], method, path, CASES[op["operationId"]], op["x-onyx-access"]["callers"])
            for method, path, op in operations(world.spec) if op["operationId"] in CASES]


def test_anonymous_callers_get_401_where_the_rule_wants_a_token(world):
    wrong, closed = [], []
    for name, method, _, case, callers in _cases(world):
        if name in ("register_profile", "register_profiles", "register_source", "register_subscriber",
                    "subscribe_metadata", "change_profiles"):
            continue  # anonymous registrations are tried below (they create tenants)
        got = _ask(world, method, case, {}, world.a).status_code
        if "anonymous" in callers:
            if got in (401, 403) or got >= 500:
                wrong.append((name, got, "admitted"))
        else:
            closed.append(name)
            if got != 401:
                wrong.append((name, got, 401))
    assert wrong == []
    assert len(closed) >= 25 and {"replay", "archive_message", "get_profile", "console_profiles", "metrics",
                                  "cache", "query"} <= set(closed)


def test_anonymous_registrations_make_new_tenants_and_nothing_else(world):
    """What anonymous callers may do: register, becoming a new subscriber or publisher; a
    change without its profile's token is 401."""
    created = world.ok("POST", "/profiles", None, {"text": "/nitf"})
    assert created["subscriber_id"] not in (world.a_id, world.b_id) and created["subscriber_token"]
    source = world.ok("POST", "/sources", None, {"name": f"anon-{uuid.uuid4().hex[:6]}"})
    assert source["publisher_token"] and source["public"] is False
    change = world.ok("POST", "/profiles:changes", None,
                      {"changes": [{"op": "delete", "profile_id": world.a_profile["profile_id"]}]})
    assert change["results"][0]["status"] == 401 and world.ok("GET", f"/profiles/{_pid(world)}", world.a)


def test_a_token_of_another_kind_gets_403(world):
    wrong, tried = [], set()
    for name, method, _, case, callers in _cases(world):
        if name == "health":
            continue  # open to everyone: tokens are not even looked at
        for kind in ("subscriber", "publisher", "operator"):
            if kind in callers:
                continue
            tried.add((name, kind))
            got = _ask(world, method, case, _headers(world, kind), world.a).status_code
            if got != 403:
                wrong.append((name, kind, got))
    assert wrong == []
    assert {("metrics", "subscriber"), ("register_profile", "operator"), ("grant_source", "subscriber"),
            ("profile_deliveries", "publisher")} <= tried


def test_subscriber_b_sees_none_of_a_s_objects(world):
    """Object-level rules: B's token (and B's profile's token) on A's objects is 404; B's
    listings leave A's objects and the sources B was not granted out."""
    wrong, tried = [], set()
    for name, method, _, case, callers in _cases(world):
        if not ({"subscriber", "owner"} & set(callers)) or name in (
                "health", "register_profile", "register_profiles", "subscribe_metadata", "list_sources",
                "list_brokers"):
            continue
        for headers in (world.b, {"X-Onyx-Token": world.b_profile["token"]}):
            kind = "subscriber" if headers is world.b else "owner"
            if kind not in callers:
                continue
            tried.add(name)
            response = _ask(world, method, case, headers, world.a)
            if case.hides is not None:
                if response.status_code != 200 or case.hides(world) in response.text:
                    wrong.append((name, kind, response.status_code, "shows A's"))
            elif name == "change_profiles":
                if response.json()["results"][0]["status"] != 404:
                    wrong.append((name, kind, response.json()["results"][0]))
            elif response.status_code != 404:
                wrong.append((name, kind, response.status_code))
    for name in ("list_sources", "list_brokers"):
        answer = world.call("GET", CASES[name].path(world), world.b)
        if answer.status_code != 200 or '"secsrc"' in answer.text:
            wrong.append((name, answer.status_code, "shows a source B may not read"))
    assert wrong == []
    assert {"get_profile", "update_profile", "delete_profile", "change_profiles", "unsubscribe_metadata", "replay",
            "archive_messages", "archive_message", "archive_recipients", "profile_history", "source_history",
            "archive_profiles", "backfill_profile", "query", "profile_deliveries", "delivered_message"} <= tried


def test_the_rightful_caller_is_answered(world):
    """A on its own objects, the publisher on its source, the operator on the rest: 2xx."""
    wrong = []
    for name, method, _, case, callers in _cases(world):
        kind = next(k for k in ("subscriber", "owner", "publisher", "operator", "anonymous") if k in callers)
        if name in ("update_source", "source_grants", "grant_source", "revoke_source"):
            kind = "publisher"
        headers = _headers(world, kind)
        got = _ask(world, method, case, headers, headers).status_code
        if not (200 <= got < 300 or (name == "backfill_profile" and got == 504)):
            wrong.append((name, kind, got))
    assert wrong == []


def test_grants_decide_who_reads_a_source_s_archive(world):
    """Granted, A replays secsrc's message; B does not, until the publisher grants it; the
    grant taken back, B is shut out again; a public source is everyone's."""
    body = {"text": "/nitf/head/title", "source": "secsrc", **_window()}

    def matched(headers) -> tuple[int, list[str]]:
        response = world.call("POST", "/replay", headers, body)
        lines = [json.loads(x) for x in response.text.splitlines()] if response.status_code == 200 else []
        return response.status_code, [x["match"]["message_id"] for x in lines if "match" in x]

    assert matched(world.a) == (200, [world.a_message])
    assert matched(world.b)[0] == 404
    world.ok("PUT", f"/sources/secsrc/grants/{world.b_id}", world.publisher)
    assert matched(world.b) == (200, [world.a_message])
    world.ok("DELETE", f"/sources/secsrc/grants/{world.b_id}", world.publisher)
    assert matched(world.b)[0] == 404
    world.ok("PATCH", "/sources/secsrc", world.publisher, {"public": True})
    try:
        assert matched(world.b) == (200, [world.a_message])
    finally:
        world.ok("PATCH", "/sources/secsrc", world.publisher, {"public": False})
    # A replay without a source covers only what the caller may read.
    everything = {"text": "/nitf/head/title", **_window()}
    found = [json.loads(x) for x in world.call("POST", "/replay", world.b, everything).text.splitlines()]
    assert not [x for x in found if "match" in x]


def test_recipients_list_only_the_caller_s_own_profiles(world):
    # Profiles of A and of an operator-granted B match the message; each sees its own.
    answer = world.ok("GET", f"/archive/messages/{world.news_message}/recipients", world.operator)
    mine = world.ok("GET", f"/archive/messages/{world.news_message}/recipients", world.a)
    assert set(mine["profiles"]) <= set(answer["profiles"])
    assert world.b_profile["profile_id"] not in mine["profiles"]
