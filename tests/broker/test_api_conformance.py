"""API conformance: schemathesis holds the registration service to its OpenAPI description.

The service runs for real, as ``onyx serve`` runs it (uvicorn on a free loopback port, a
SQLite file, the session's Kafka broker), with an operator token so ``POST /rebalance`` is
enabled. Schemathesis (its command line, in a process of its own) reads ``/openapi.json``
and runs every phase (examples, coverage, fuzzing and the stateful phase, which follows
the description's links: a registered profile's id and token to ``GET``/``PUT``/``DELETE
/profiles/{id}``, a new subscriber's token to ``POST /profiles``) with ``--checks all``.
Its settings and hooks are in ``tests/broker/conformance/``: no example database and
deterministic generation (the same cases every run), the tokens supplied for the
token-guarded operations, valid profile texts and schemas for the ``onyx-profile`` and
``onyx-schema`` formats. Run it by
hand the same way (see the README, "API conformance").
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings

from archive.writer import archive_rows
from broker.local.devcluster import KafkaDevCluster, free_port
from broker.registry.control_packets import source_dictionary
from broker.registry.serve import BackgroundServer, ServiceSettings
from broker.registry.store import SourceRecord
from broker.registry.webhooks import check_url
from cache import split_query
from routing.overlay import builtin
from tests.broker.conformance import hooks
from yfilter import validate

REPO_ROOT = Path(__file__).resolve().parents[2]
SETTINGS = Path(__file__).resolve().parent / "conformance" / "schemathesis.toml"
ADMIN_TOKEN = "conformance-operator-token"
# The stateful phase runs first, in a run of its own, on the service as the fixture made it:
# after the other phases' thousands of registrations (sources by the hundred, ...) it
# followed only six or seven of the nine links in its budget of scenarios.
PHASES = ("stateful", "examples,coverage,fuzzing")


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    # A Kafka of its own: the profiles schemathesis registers (``//*`` among them) go
    # to the overlay's fixed topics, where a later overlay on the session's Kafka would
    # find them and route by them.
    run_dir = tmp_path_factory.mktemp("conformance")
    # An archive with a few messages, so that the time-travel operations have something to
    # answer (and the links schemathesis infers to a message's id can be followed).
    archive_rows(run_dir / "archive", [
        {"topic": "onyx.src.news", "partition": 0, "offset": i, "ts_ms": 1_764_115_200_000 + i, "key": None,
         "value": f"<nitf><head><title>t{i}</title></head></nitf>".encode(),
         "headers": [{"key": "onyx-message-id", "value": f"m{i}".encode()}]} for i in range(3)])
    kafka = KafkaDevCluster(name="conformance", run_dir=run_dir, port=free_port(), controller_port=free_port()).start()
    server = BackgroundServer(ServiceSettings(kafka.bootstrap_servers, builtin(), f"sqlite:///{run_dir / 'onyx.db'}",
                                              "127.0.0.1", free_port(), admin_token=ADMIN_TOKEN,
                                              archive_dir=run_dir / "archive",
                                              delivery_prefixes=("alerts.",))).start()
    yield server
    server.stop()
    kafka.stop()


def schemathesis(url: str, max_examples: int, phases: str) -> tuple[int, str]:
    """Run the schemathesis command line's ``phases`` against the service at ``url``: its
    exit status and what it printed."""
    command = [sys.executable, "-m", "schemathesis.cli", "--config-file", str(SETTINGS), "run",
               f"{url}/openapi.json", "--checks", "all", "--phases", phases, "--max-examples", str(max_examples),
               "--no-color", "--output-truncate", "true"]
    env = {**os.environ, hooks.ADMIN_TOKEN_ENV: ADMIN_TOKEN,  # the hooks module is imported from the repository
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=540)
    return done.returncode, done.stdout + done.stderr


def conforms(url: str, max_examples: int) -> str:
    """Assert that schemathesis found nothing: every phase ran and passed, every generated
    case passed, every link of the description was followed; returns the output."""
    outs = []
    for phases in PHASES:
        # Four times the scenarios for the stateful phase: 37 operations share them (three was not
        # enough once GET /profiles/{id}/messages/{message_id} came: the batch link went unfollowed).
        status, out = schemathesis(url, max_examples * (4 if phases == "stateful" else 1), phases)
        report = out[-25_000:]
        assert status == 0, f"schemathesis exited with {status}:\n{report}"
        cases = re.search(r"(\d+) generated, (\d+) passed", out)
        assert cases and int(cases[1]) == int(cases[2]) > 0, report
        for phase in phases.split(","):
            assert re.search(rf"✅\s+{phase.capitalize()}", out), f"phase {phase} did not pass:\n{report}"
        outs.append(out)
    stateful = outs[0]
    links = re.search(r"API Links:\s+(\d+) covered / (\d+) selected / (\d+) total", stateful)
    assert links and links[1] == links[2] == links[3] and int(links[1]) >= 9, stateful[-25_000:]
    scenarios = re.search(r"Scenarios:\s+(\d+)", stateful)
    assert scenarios and int(scenarios[1]) > 0, stateful[-25_000:]
    return "\n".join(outs)


@pytest.mark.kafka
def test_the_running_service_conforms_to_its_openapi_description(service):
    conforms(service.url, max_examples=100)


@pytest.mark.kafka
@pytest.mark.slow
def test_the_running_service_conforms_to_its_openapi_description_at_length(service):
    conforms(service.url, max_examples=1000)


@settings(max_examples=300, deadline=None)
@given(hooks.PROFILES)
def test_the_generated_profile_texts_are_profiles(text):
    validate(text)  # what the description's onyx-profile format promises the positive cases


@settings(max_examples=300, deadline=None)
@given(hooks.QUERIES)
def test_the_generated_queries_are_ones_the_cache_takes(text):
    split_query(text)  # what the description's onyx-query format promises the positive cases


@settings(max_examples=100, deadline=None)
@given(hooks.WEBHOOKS)
def test_the_generated_webhooks_are_ones_the_service_takes(url):
    check_url(url, allow_private=False)


@settings(max_examples=100, deadline=None)
@given(hooks.SCHEMAS)
def test_the_generated_schemas_are_ones_a_source_may_name(text):
    assert source_dictionary(SourceRecord("s", "s", "b1", text, None, None)) is not None


@settings(max_examples=100, deadline=None)
@given(hooks.RULES)
def test_the_generated_rules_are_ones_the_metadata_provider_takes(text):
    from catalog import Backbone

    from broker.metadata.onyx_schema import ONYX_SCHEMA

    mdp = Backbone()
    mdp.register_schema(ONYX_SCHEMA)
    mdp.connect("probe", lambda delta: None)
    mdp.subscribe("probe", text)  # what the description's onyx-rule format promises the positive cases
