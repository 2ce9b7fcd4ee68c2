"""Issue 33 on a running overlay (`onyx up --detach`, six brokers, in processes of its own as a
user runs it): the console in a real headless browser (Debian's chromium through Playwright),
/metrics scraped, a profile's deliveries over Server-Sent Events across a disconnect in the
middle of a burst (checked against the centralized engine), `onyx subscribe --sse`, and
webhooks: a receiver on loopback gets signed deliveries, a failing one ends in the
dead-letter topic with the reason."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from broker import config
from broker.clients import api, messages_from, publish, stream_deliveries
from broker.registry.webhooks import MESSAGE_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign
from yfilter import Engine

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

ARTIFACTS = config.RUN_DIR / "artifacts"
PROBE = b"<nitf><head><title>probe</title></head><body><body.head><hedline><hl1>probe</hl1></hedline>" \
        b"</body.head></body></nitf>"
ATTEMPTS = 3  # ONYX_WEBHOOK_ATTEMPTS of the overlay below
ADMIN = "console-operator-token"  # its ONYX_ADMIN_TOKEN: the console's data and /metrics need it


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("onyx-console")
    return {**os.environ, "ONYX_RUN_DIR": str(run_dir), "PYTHONUNBUFFERED": "1",
            # the webhook receivers of these tests listen on loopback, which an operator must allow
            "ONYX_WEBHOOK_ALLOW_PRIVATE": "1", "ONYX_WEBHOOK_ATTEMPTS": str(ATTEMPTS), "ONYX_WEBHOOK_BACKOFF": "0.2",
            "ONYX_SSE_KEEPALIVE": "1", "ONYX_CONSOLE_EVERY": "1", "ONYX_ADMIN_TOKEN": ADMIN}


def onyx(env, *args, timeout=300):
    proc = subprocess.run([sys.executable, "-m", "broker.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"onyx {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def overlay(env):
    onyx(env, "up", "--detach", "--no-archive", "--timeout", "400", timeout=450)
    info = json.loads((Path(env["ONYX_RUN_DIR"]) / "cluster.json").read_text())
    yield info
    onyx(env, "down", timeout=200)


def probe(overlay, n=2) -> list[str]:
    """Publish ``n`` messages every profile below matches; their ids."""
    return publish(overlay["bootstrap_servers"], overlay["source_topic"], [("probe", PROBE)] * n, progress=False)


def operator_get(url: str) -> tuple[str, str]:
    """GET an operator endpoint with the operator token: (content type, body)."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {ADMIN}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.headers["Content-Type"], answer.read().decode()


def metrics(url: str) -> dict[str, float]:
    """``/metrics`` as {'name{labels}': value}."""
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{url}/metrics", timeout=30)
    assert refused.value.code == 401  # not without the operator token
    content_type, text = operator_get(f"{url}/metrics")
    assert content_type.startswith("text/plain")
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line and not line.startswith("#")}


def test_metrics_are_scraped_with_every_brokers_figures(overlay):
    deadline = time.monotonic() + 60
    while True:
        got = metrics(overlay["api_url"])
        up = {k: v for k, v in got.items() if k.startswith("onyx_broker_up{")}
        if len(up) == 6 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert sorted(up) == [f'onyx_broker_up{{broker="b{i}"}}' for i in range(1, 7)] and set(up.values()) == {1.0}
    for name in ("onyx_messages_in_total", "onyx_messages_delivered_total", "onyx_dead_letters_total",
                 "onyx_lag_records", "onyx_routing_atoms", "onyx_profiles_hosted"):
        assert any(k.startswith(name + "{") for k in got), name


def test_sse_delivers_exactly_the_profiles_matches_across_a_reconnect_mid_burst(overlay):
    url = overlay["api_url"]
    mine = api("POST", f"{url}/profiles", {"text": "//hl1", "near": "b5"})
    # Another profile of the same subscriber, on the same delivery topic, matching everything:
    # none of its deliveries may show up on the first one's stream.
    other = api("POST", f"{url}/profiles", {"text": "/nitf", "near": "b3"},
                subscriber_token=mine["subscriber_token"])
    assert other["delivery_topic"] == mine["delivery_topic"]
    probes: set[str] = set()
    stream = stream_deliveries(url, mine["profile_id"], mine["token"], from_start=True, timeout=30)
    deadline = time.monotonic() + 240
    last = None
    while last is None:  # until the profile's routing query has reached the root
        assert time.monotonic() < deadline, "no delivery of the probes in 240 s"
        probes |= set(probe(overlay))
        for event in stream:
            if event is None:
                break
            last = event["event_id"]
    stream.close()
    burst = list(messages_from([], generate=80, seed=11))
    engine = Engine()
    engine.add("mine", "//hl1")
    sent: list[str] = []
    publisher = threading.Thread(target=lambda: sent.extend(
        publish(overlay["bootstrap_servers"], overlay["source_topic"], burst, rate=16, progress=False)))
    publisher.start()
    received: list[dict] = []
    for event in stream_deliveries(url, mine["profile_id"], mine["token"], last_event_id=last, timeout=30):
        if event is not None:
            received.append(event)
            if len([e for e in received if e["message_id"] not in probes]) >= 4:
                break  # the connection goes away in the middle of the burst ...
    cut = received[-1]["event_id"]
    time.sleep(2)  # ... while the burst goes on
    publisher.join()
    expected = {mid for mid, (_, xml) in zip(sent, burst) if engine.match(xml)}
    assert 0 < len(expected) < len(burst)
    deadline = time.monotonic() + 180
    for event in stream_deliveries(url, mine["profile_id"], mine["token"], last_event_id=cut, timeout=30):
        if event is not None:
            received.append(event)
        if {e["message_id"] for e in received} >= expected or time.monotonic() > deadline:
            break
    time.sleep(3)  # anything extra (a duplicate, another profile's) would have come by now
    tail = stream_deliveries(url, mine["profile_id"], mine["token"], last_event_id=received[-1]["event_id"],
                             timeout=30)
    for event in tail:
        if event is None:
            break
        received.append(event)
    tail.close()
    ids = [e["message_id"] for e in received if e["message_id"] not in probes]
    assert {e["profile_id"] for e in received} == {mine["profile_id"]}
    assert len(ids) == len(set(ids)), "a delivery came twice"
    assert set(ids) == expected, f"lost {len(expected - set(ids))}, extra {len(set(ids) - expected)}"
    offsets = [e["offset"] for e in received]
    assert offsets == sorted(offsets) and all(e["event_id"] == str(e["offset"]) for e in received)
    # the other profile had deliveries of the burst on the same topic meanwhile: the stream left them out
    theirs = set()
    for event in stream_deliveries(url, other["profile_id"], other["token"], from_start=True, timeout=30):
        if event is None:
            break
        theirs.add(event["message_id"])
    assert theirs & set(sent) - expected
    for pid, token in ((mine["profile_id"], mine["token"]), (other["profile_id"], other["token"])):
        api("DELETE", f"{url}/profiles/{pid}", token=token)


def test_the_delivery_stream_needs_the_profiles_token(overlay):
    url = overlay["api_url"]
    a = api("POST", f"{url}/profiles", {"text": "/nitf/never"})
    b = api("POST", f"{url}/profiles", {"text": "/nitf/never"})  # another subscriber's: A's profile is not shown
    for token, status in ((None, 401), (b["token"], 404), ("not-a-token", 401)):
        request = urllib.request.Request(f"{url}/profiles/{a['profile_id']}/deliveries",
                                         headers={"X-Onyx-Token": token} if token else {})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == status
    for p in (a, b):
        api("DELETE", f"{url}/profiles/{p['profile_id']}", token=p["token"])


def test_onyx_subscribe_sse(env, overlay):
    sub = subprocess.Popen([sys.executable, "-m", "broker.cli", "subscribe", "/nitf[head/title = 'probe']", "--sse",
                            "--near", "b4", "--count", "1", "--timeout", "200"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = sub.stdout.readline()
    assert "the event stream of onyx.deliver." in first, first + sub.stderr.read()
    deadline = time.monotonic() + 200
    while sub.poll() is None and time.monotonic() < deadline:
        probe(overlay)
        time.sleep(3)
    rest, err = sub.communicate(timeout=60)
    assert sub.returncode == 0, err
    assert "probe" in rest and "1 deliveries" in rest and "deleted profile" in rest


class Receiver(BaseHTTPRequestHandler):
    """A webhook receiver: records each POST; answers ``status``."""

    status = 200

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.posts.append((dict(self.headers), body))
        self.send_response(self.status)
        self.end_headers()

    def log_message(self, *args):
        pass


class Failing(Receiver):
    status = 500


def receiver(handler) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.posts = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_webhooks_are_signed_and_a_failing_one_ends_in_the_dead_letter_topic(overlay):
    url = overlay["api_url"]
    good, bad = receiver(Receiver), receiver(Failing)
    try:
        good_url = f"http://127.0.0.1:{good.server_address[1]}/onyx"
        bad_url = f"http://127.0.0.1:{bad.server_address[1]}/broken"
        ok = api("POST", f"{url}/profiles", {"text": "/nitf/head/title", "near": "b6",
                                             "delivery": {"webhook": good_url}})
        broken = api("POST", f"{url}/profiles", {"text": "/nitf/head/title", "near": "b2",
                                                 "delivery": {"webhook": bad_url}},
                     subscriber_token=ok["subscriber_token"])
        dead = []
        deadline = time.monotonic() + 240
        while not (good.posts and dead):
            assert time.monotonic() < deadline, f"{len(good.posts)} signed POSTs, dead letters {dead}"
            probe(overlay, 1)
            time.sleep(3)
            dead = [d for d in json.loads(operator_get(f"{url}/console/dead-letters")[1]) if bad_url in d["reason"]]
        for headers, body in good.posts:
            assert headers[SIGNATURE_HEADER] == sign(ok["webhook_secret"], headers[TIMESTAMP_HEADER],
                                                     headers[MESSAGE_ID_HEADER], body)
            assert headers["X-Onyx-Profile-Id"] == ok["profile_id"] and b"<hl1>probe</hl1>" in body
        assert dead[0]["origin"] == broken["delivery_topic"] and f"failed {ATTEMPTS} times" in dead[0]["reason"]
        assert "HTTP 500" in dead[0]["reason"] and "<hl1>probe</hl1>" in dead[0]["preview"]
        assert len(bad.posts) >= ATTEMPTS
        assert all(h["X-Onyx-Profile-Id"] == broken["profile_id"] for h, _ in bad.posts)
        counted = metrics(url)
        assert counted["onyx_webhook_posted_total"] >= len(good.posts)
        assert counted["onyx_webhook_dead_lettered_total"] >= len(dead)
        for p in (ok, broken):
            api("DELETE", f"{url}/profiles/{p['profile_id']}", token=p["token"])
    finally:
        good.shutdown()
        bad.shutdown()


def test_the_console_in_a_real_browser_shows_six_brokers_and_messages_rising(overlay):
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (make chromium installs it)")
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    # Last in this module: the dead letters of the webhook test are there to see. A few profiles
    # for the graph and the profile list (kept until the screenshot is taken).
    first = api("POST", f"{overlay['api_url']}/profiles", {"text": "//hl1", "near": "b5"})
    kept = [first] + [api("POST", f"{overlay['api_url']}/profiles", {"text": text, "near": near},
                          subscriber_token=first["subscriber_token"])
                      for text, near in (("/nitf/head/title", "b6"), ("/nitf[head/pubdata/@edition.area='SF']", "b3"))]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{overlay['api_url']}/console#token={ADMIN}")  # the page keeps it, out of the URL
            page.wait_for_function("document.querySelectorAll('#brokers tbody tr').length === 6", timeout=60_000)
            page.wait_for_function("document.querySelectorAll('#graph circle.broker').length === 6", timeout=30_000)
            rows = page.eval_on_selector_all("#brokers tbody tr", "rows => rows.map(r => r.dataset.broker)")
            assert rows == ["b1", "b2", "b3", "b4", "b5", "b6"]
            assert page.eval_on_selector_all("#graph line.tree-link", "ls => ls.length") == 5  # news' tree
            delivered_before = int(page.inner_text("#total-delivered"))
            before = int(page.inner_text("#total-messages"))
            publish(overlay["bootstrap_servers"], overlay["source_topic"],
                    list(messages_from([], generate=40, seed=3)), rate=20, progress=False)
            page.wait_for_function(f"Number(document.getElementById('total-messages').textContent) >= {before + 40}",
                                   timeout=120_000)
            deadline = time.monotonic() + 120
            while int(page.inner_text("#total-delivered")) <= delivered_before:  # the profiles' routing converged
                assert time.monotonic() < deadline, "the console showed no delivery in 120 s"
                probe(overlay, 1)
                time.sleep(3)
            page.fill("#search", "hl1")
            page.wait_for_function("document.querySelectorAll('#profiles tbody tr').length === 1", timeout=30_000)
            page.fill("#search", "")
            page.wait_for_function(f"document.querySelectorAll('#profiles tbody tr').length === {len(kept)}",
                                   timeout=30_000)
            time.sleep(3)  # a few more points on the plots
            page.screenshot(path=str(ARTIFACTS / "console.png"), full_page=True)
            assert page.inner_text("#stream-status") == "live" and "#token" not in page.url
        finally:
            browser.close()
            for p in kept:
                api("DELETE", f"{overlay['api_url']}/profiles/{p['profile_id']}", token=p["token"])
    assert (ARTIFACTS / "console.png").stat().st_size > 10_000
