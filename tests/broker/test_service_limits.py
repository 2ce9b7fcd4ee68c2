"""What the registration service promises beyond each operation's own work: one error body
everywhere (the OpenAPI description's ``Error``), request bodies within their limits (413),
a rate of registrations and changes per subscriber (429 with Retry-After), and a
description that documents all of it; in process (TestClient) and over real HTTP."""

from __future__ import annotations

import http.client
import json

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.exc import OperationalError

import broker.registry.app
from broker import config
from broker.local.devcluster import free_port
from broker.registry.app import MAX_BATCH_BYTES, MAX_BODY_BYTES, MAX_PROFILE_CHARS, create_app
from broker.registry.limits import RateLimited, RateLimiter
from broker.registry.serve import BackgroundServer, ServiceSettings
from broker.registry.store import Store
from routing.overlay import builtin
from tests.broker.test_service_batch import Admin, BatchSender, _batch


class Clock:
    """A clock the test moves (the rate limiter's time)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _service(tmp_path, **kwargs) -> tuple[TestClient, Store]:
    store = Store(f"sqlite:///{tmp_path / 'onyx.db'}")
    return TestClient(create_app(store, builtin(), BatchSender(), topic_admin=Admin(), **kwargs,
                                 allowed_hosts=["testserver"]),
                      raise_server_exceptions=False), store


@pytest.fixture
def client(tmp_path):
    return _service(tmp_path)[0]


@pytest.fixture
def limited(tmp_path):
    """A service whose subscribers may make 10 registrations or changes a second, 20 at once."""
    clock = Clock()
    client, store = _service(tmp_path, rate_limit=RateLimiter(rate=10, burst=20, clock=clock))
    return client, store, clock


# -- one error body -----------------------------------------------------------------------------


def test_the_description_documents_every_error_with_the_one_error_body(client):
    spec = client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    assert "HTTPValidationError" not in schemas and "ValidationError" not in schemas
    assert schemas["Error"]["required"] == ["detail"] and "column" in schemas["Error"]["properties"]
    for path, operations in spec["paths"].items():
        for method, op in operations.items():
            for status, answer in op["responses"].items():
                if status[0] in "45":
                    model = "Health" if path == "/health" else "Error"
                    assert answer["content"]["application/json"]["schema"] == {
                        "$ref": f"#/components/schemas/{model}"}, (method, path, status)
            if "requestBody" in op:
                assert {"400", "413", "422"} <= set(op["responses"]), (method, path)
    register = spec["paths"]["/profiles"]["post"]["responses"]
    assert set(register) == {"201", "400", "401", "409", "413", "422", "429", "503"}
    assert register["429"]["headers"]["Retry-After"]["schema"] == {"type": "integer", "minimum": 1}
    assert set(spec["paths"]["/profiles/{profile_id}"]["delete"]["responses"]) == {
        "204", "401", "403", "404", "429", "503"}


def test_the_description_says_what_the_limits_are(client):
    spec = client.get("/openapi.json").json()
    text = spec["info"]["description"]
    assert f"{MAX_BATCH_BYTES:,} bytes" in text and f"{MAX_BODY_BYTES:,}" in text and "429" in text
    # and the lower ones of a request without a token
    assert f"at most {config.ANONYMOUS_MAX_BATCH:,} profiles and {config.ANONYMOUS_MAX_CHARS:,} characters" in text
    assert spec["components"]["schemas"]["ProfileIn"]["properties"]["text"]["maxLength"] == MAX_PROFILE_CHARS
    assert spec["components"]["schemas"]["ProfileBatchIn"]["properties"]["profiles"]["maxItems"] == 10_000


def test_the_description_names_the_tokens_and_links_a_profile_to_what_its_token_can_do(client):
    spec = client.get("/openapi.json").json()
    schemes = spec["components"]["securitySchemes"]
    assert {name: s.get("name") for name, s in schemes.items()} == {
        "SubscriberToken": "X-Onyx-Subscriber-Token", "ProfileToken": "X-Onyx-Token",
        "PublisherToken": "X-Onyx-Publisher-Token", "AdminToken": "X-Onyx-Admin-Token", "Bearer": None}
    assert schemes["Bearer"]["type"] == "http" and schemes["Bearer"]["scheme"].lower() == "bearer"
    update = spec["paths"]["/profiles/{profile_id}"]["put"]
    # The profile's token or its subscriber's, either also as a Bearer token; never without one.
    assert update["security"] == [{"ProfileToken": []}, {"SubscriberToken": []}, {"Bearer": []}]
    assert sorted(update["x-onyx-access"]["callers"]) == ["owner", "subscriber"] and update["x-onyx-access"]["sees"]
    links = spec["paths"]["/profiles"]["post"]["responses"]["201"]["links"]
    assert links["UpdateProfile"] == {"operationId": "update_profile", "description": "replace its text, with its token",
                                      "parameters": {"profile_id": "$response.body#/profile_id",
                                                     "header.X-Onyx-Token": "$response.body#/token"}}
    assert spec["components"]["schemas"]["ProfileChange"]["properties"]["op"]["enum"] == ["update", "delete"]


@pytest.mark.parametrize("body, detail", [
    ({}, "body.text: Field required: nothing was changed"),
    ({"text": "/a", "location": [1, True]}, "body.location.1: Input should be a valid number"),
    ({"text": "/a", "delivery": {"topic": ".."}}, "is not '.' or '..'"),
])
def test_a_request_the_schema_refuses_gets_the_one_error_body(client, body, detail):
    r = client.post("/profiles", json=body)
    assert r.status_code == 422 and set(r.json()) == {"detail"} and detail in r.json()["detail"]


def test_a_body_that_is_not_json_is_told_so(client):
    r = client.post("/profiles", content=b'{"text": ', headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"].startswith("the body is not JSON: Expecting value at character")
    r = client.post("/profiles", content=b'{"text": "\xff"}', headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json() == {"detail": "the body is not JSON text in UTF-8: nothing was changed"}


def test_a_method_a_path_does_not_take_is_405_naming_every_method_it_takes(client):
    r = client.patch("/profiles/p1", json={})
    assert r.status_code == 405 and r.json() == {"detail": "Method Not Allowed"}
    assert r.headers["Allow"] == "DELETE, GET, PUT"


def test_a_database_failure_is_503_with_the_one_error_body(tmp_path, monkeypatch):
    client, store = _service(tmp_path)
    token = client.post("/subscribers").json()["token"]

    def down(*args, **kwargs):
        raise OperationalError("SELECT ...", {}, Exception("unable to open database file"))

    monkeypatch.setattr(store, "profile", down)
    r = client.get("/profiles/p1", headers={"X-Onyx-Subscriber-Token": token})
    assert r.status_code == 503 and r.json() == {
        "detail": "the database failed (unable to open database file); nothing was changed, try again"}


def test_a_source_size_is_a_json_integer_and_a_rate_a_finite_number(client):
    assert client.post("/sources", json={"name": "a", "size": 4096.0, "rate": 2}).status_code == 201
    for bad in ({"size": "4096"}, {"size": True}, {"size": 2**53}, {"rate": "2"}):
        assert client.post("/sources", json={"name": "b", **bad}).status_code == 422, bad


# -- body sizes ---------------------------------------------------------------------------------


def test_every_body_over_its_operation_limit_is_413_before_anything_happens(tmp_path, monkeypatch):
    monkeypatch.setattr(broker.registry.app, "MAX_BODY_BYTES", 1000)
    client, store = _service(tmp_path)
    pid = client.post("/profiles", json={"text": "/a"}).json()["profile_id"]
    big = {"text": "/nitf/" + "x" * 1000}
    for method, path in [("POST", "/profiles"), ("PUT", f"/profiles/{pid}"), ("POST", "/sources")]:
        r = client.request(method, path, json={**big, "name": "n"}, headers={"X-Onyx-Token": "t"})
        assert r.status_code == 413, (method, path)
        assert r.json()["detail"].startswith("the request body has 1,") and "more than the 1,000 bytes" in r.json()[
            "detail"]
    assert [p.text for p in store.list_profiles()] == ["/a"]
    assert _batch(client, [big]).status_code == 200  # the bulk operations take up to MAX_BATCH_BYTES


def test_the_longest_profile_fits_in_a_body_however_it_is_escaped(client):
    text = "/nitf[@id = '" + "\U0001F600" * (MAX_PROFILE_CHARS - 15) + "']"
    body = json.dumps({"text": text}).encode()  # ASCII: each character a 12-byte surrogate pair
    assert len(text) == MAX_PROFILE_CHARS and len(body) > 1_100_000
    r = client.post("/profiles", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 201, r.text[:300]


def test_a_body_without_a_length_is_counted_as_it_arrives(tmp_path, monkeypatch):
    monkeypatch.setattr(broker.registry.app, "MAX_BODY_BYTES", 1000)
    client, store = _service(tmp_path)

    def chunks(body: bytes):
        for i in range(0, len(body), 100):
            yield body[i:i + 100]

    body = json.dumps({"text": "/nitf/" + "x" * 2000}).encode()
    r = client.post("/profiles", content=chunks(body), headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and "is longer, more than the 1,000 bytes" in r.json()["detail"]
    assert store.list_profiles() == []
    small = json.dumps({"text": "/nitf"}).encode()
    assert client.post("/profiles", content=chunks(small), headers={"Content-Type": "application/json"}
                       ).status_code == 201


def test_a_schema_without_a_token_has_the_anonymous_limit(client):
    dtd = "".join(f"<!ELEMENT e{i} (#PCDATA)>\n" for i in range(4200))  # 112,290 characters
    assert len(dtd) > config.ANONYMOUS_MAX_CHARS
    r = client.post("/sources", json={"name": "big", "schema": dtd})
    assert r.status_code == 413 and f"{config.ANONYMOUS_MAX_CHARS:,}" in r.json()["detail"]
    publisher = client.post("/sources", json={"name": "small", "schema": dtd[:5000]}).json()["publisher_token"]
    r = client.post("/sources", json={"name": "big", "schema": dtd}, headers={"X-Onyx-Publisher-Token": publisher})
    assert r.status_code == 201, r.text


def test_each_publisher_and_all_anonymous_callers_have_a_rate_of_new_sources(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "SOURCE_RATE", 0.001)  # refills nothing during the test
    monkeypatch.setattr(config, "SOURCE_BURST", 2)
    client, _ = _service(tmp_path, admin_token="op")
    first = client.post("/sources", json={"name": "a1"}).json()["publisher_token"]
    assert client.post("/sources", json={"name": "a2"}).status_code == 201
    r = client.post("/sources", json={"name": "a3"})  # the anonymous callers' third
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
    mine = {"X-Onyx-Publisher-Token": first}  # a publisher has a bucket of its own
    assert [client.post("/sources", json={"name": f"p{i}"}, headers=mine).status_code for i in range(3)] == \
        [201, 201, 429]
    assert client.post("/sources", json={"name": "o1"}, headers={"X-Onyx-Admin-Token": "op"}).status_code == 201


# -- rate -----------------------------------------------------------------------------------------


def test_a_subscriber_over_its_rate_gets_429_with_retry_after_and_nothing_happens(limited):
    client, store, clock = limited
    sub = client.post("/subscribers").json()["token"]
    assert _batch(client, [{"text": f"/a{i}"} for i in range(15)], token=sub).json()["registered"] == 15
    r = _batch(client, [{"text": f"/b{i}"} for i in range(10)], token=sub)
    assert r.status_code == 429 and r.headers["Retry-After"] == "1"  # 5 tokens short at 10/s: 0.5 s
    assert "10/s, in bursts of up to 20 profiles: this request has 10 and 5 are left" in r.json()["detail"]
    assert len(store.list_profiles()) == 15
    other = client.post("/subscribers").json()["token"]  # another subscriber has its own bucket
    assert _batch(client, [{"text": f"/c{i}"} for i in range(20)], token=other).status_code == 200
    clock.now += 0.5
    assert _batch(client, [{"text": f"/b{i}"} for i in range(10)], token=sub).status_code == 200
    r = client.post("/profiles", json={"text": "/d"}, headers={"X-Onyx-Subscriber-Token": sub})
    assert r.status_code == 429 and r.headers["Retry-After"] == "1"


def test_updates_and_deletes_count_for_the_profile_s_subscriber_once_its_token_is_checked(limited):
    client, _, clock = limited
    sub = client.post("/subscribers").json()["token"]
    body = _batch(client, [{"text": f"/a{i}"} for i in range(20)], token=sub).json()  # its whole burst
    first = body["results"][0]["profile"]
    for _ in range(5):  # refused for their token: they take nothing from the subscriber's bucket
        assert client.delete(f"/profiles/{first['profile_id']}", headers={"X-Onyx-Token": "nope"}).status_code == 401
    clock.now += 0.2  # 2 tokens back
    ok = {"X-Onyx-Token": first["token"]}
    assert client.put(f"/profiles/{first['profile_id']}", json={"text": "/z"}, headers=ok).status_code == 200
    assert client.delete(f"/profiles/{first['profile_id']}", headers=ok).status_code == 204
    second = body["results"][1]["profile"]
    r = client.delete(f"/profiles/{second['profile_id']}", headers={"X-Onyx-Token": second["token"]})
    assert r.status_code == 429
    changes = [{"op": "delete", "profile_id": second["profile_id"]}]
    r = client.post("/profiles:changes", json={"changes": changes}, headers={"X-Onyx-Subscriber-Token": sub})
    assert r.status_code == 429
    clock.now += 0.1
    r = client.post("/profiles:changes", json={"changes": changes}, headers={"X-Onyx-Subscriber-Token": sub})
    assert r.status_code == 200 and r.json()["applied"] == 1


def test_requests_without_a_subscriber_token_share_one_bucket(limited):
    client, _, _ = limited
    assert _batch(client, [{"text": f"/a{i}"} for i in range(18)]).status_code == 200
    assert client.post("/profiles", json={"text": "/b"}).status_code == 201
    assert client.post("/profiles", json={"text": "/c"}).status_code == 201
    assert client.post("/profiles", json={"text": "/d"}).status_code == 429


def test_a_request_larger_than_the_burst_needs_a_full_bucket():
    clock = Clock()
    limiter = RateLimiter(rate=100, burst=1000, clock=clock)
    limiter.charge("s", 5000)  # takes the whole bucket
    with pytest.raises(RateLimited) as refused:
        limiter.charge("s", 5000)
    assert refused.value.retry_after == pytest.approx(10.0) and refused.value.retry_after_header == "10"
    clock.now += 10
    limiter.charge("s", 5000)


def test_rate_zero_is_no_limit_and_a_bad_setting_says_which_variable():
    limiter = RateLimiter(rate=0, burst=1)
    for _ in range(3):
        limiter.charge("s", 10**6)
    assert limiter.describe() == "Registrations are not rate-limited."
    with pytest.raises(ValueError, match="ONYX_REGISTRATION_BURST"):
        RateLimiter(rate=10, burst=0)


def test_the_limiter_forgets_full_buckets_when_it_holds_many():
    clock = Clock()
    limiter = RateLimiter(rate=1, burst=5, clock=clock)
    limiter.MAX_KEYS = 3
    for key in "abc":
        limiter.charge(key, 1)
    clock.now += 10  # all full again: the same as no bucket
    limiter.charge("d", 1)
    assert set(limiter._buckets) == {"d"}


# -- over real HTTP -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def slow_service(kafka, tmp_path_factory):
    """The real service (uvicorn, SQLite file, Kafka) with a tiny rate: 2 at once, then one
    every 1,000 s (no test waits for it)."""
    db = tmp_path_factory.mktemp("limits") / "onyx.db"
    server = BackgroundServer(ServiceSettings(kafka.bootstrap_servers, builtin(), f"sqlite:///{db}", "127.0.0.1",
                                              free_port(), registration_rate=0.001, registration_burst=2)).start()
    yield server
    server.stop()


def _http(server: BackgroundServer, method: str, path: str, body: bytes | None = None,
          headers: dict[str, str] | None = None, chunked: bool = False) -> tuple[int, dict, dict]:
    conn = http.client.HTTPConnection(server.settings.host, server.settings.port, timeout=30)
    try:
        conn.request(method, path, body=iter([body]) if chunked else body,
                     headers={"Content-Type": "application/json", **(headers or {})}, encode_chunked=chunked)
        answer = conn.getresponse()
        return answer.status, dict(answer.getheaders()), json.loads(answer.read() or b"null")
    finally:
        conn.close()


@pytest.mark.kafka
def test_over_http_a_subscriber_past_its_burst_is_told_when_to_come_back(slow_service):
    status, _, sub = _http(slow_service, "POST", "/subscribers")
    assert status == 201
    token = {"X-Onyx-Subscriber-Token": sub["token"]}
    for text in ("/nitf/a", "/nitf/b"):
        assert _http(slow_service, "POST", "/profiles", json.dumps({"text": text}).encode(), token)[0] == 201
    status, headers, body = _http(slow_service, "POST", "/profiles", json.dumps({"text": "/nitf/c"}).encode(), token)
    assert status == 429 and int(headers["retry-after"]) >= 1 and "Retry-After" in body["detail"]


@pytest.mark.kafka
def test_over_http_an_oversized_body_is_413_with_or_without_a_length(slow_service):
    body = json.dumps({"text": "/nitf/" + "x" * MAX_BODY_BYTES}).encode()
    for chunked in (False, True):
        status, _, answer = _http(slow_service, "POST", "/profiles", body, chunked=chunked)
        assert status == 413 and f"more than the {MAX_BODY_BYTES:,} bytes" in answer["detail"], chunked
