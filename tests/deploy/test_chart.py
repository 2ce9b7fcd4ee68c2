"""The Helm chart rendered by the real helm: topics, brokers, values and their schema."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
import tomllib

import pytest
import yaml

from broker import topics
from broker.cli import build_parser
from broker.deploy import render as deploy_render
from broker.deploy import acls
from broker.deploy.render import CHART_DIR, overlay_values, render
from broker.deploy.topology import topology
from routing.overlay import Overlay, builtin


def by_kind(manifests: str) -> dict[str, list[dict]]:
    docs: dict[str, list[dict]] = {}
    for doc in yaml.safe_load_all(manifests):
        if doc:
            docs.setdefault(doc["kind"], []).append(doc)
    return docs


def broker_apps(docs) -> dict[str, dict]:
    """The brokers' SparkApplications by broker id (the archive writer's is not one)."""
    return {a["metadata"]["annotations"]["onyx.io/broker-id"]: a for a in docs["SparkApplication"]
            if a["metadata"]["labels"]["onyx.io/component"] == "broker"}


def test_default_values_hold_the_generated_figure4_overlay():
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    assert values["overlay"] == overlay_values(builtin("figure4"))["overlay"], (
        "deploy/helm/onyx/values.yaml is stale: replace its `overlay:` block with the output of "
        "`onyx deploy render --values-only`"
    )


def test_every_topic_read_or_written_has_a_kafka_topic_and_every_broker_an_application(helm, overlay):
    docs = by_kind(render(overlay, helm=helm))
    declared = {t["spec"]["topicName"] for t in docs["KafkaTopic"]}
    # What the brokers read and write, as the rendered overlay ConfigMap tells them.
    (configmap,) = docs["ConfigMap"]
    rendered = yaml.safe_load(configmap["data"]["topology.yaml"])
    touched = {t for b in rendered["brokers"] for t in (*b["reads"], *b["writes"])}
    assert touched and touched <= declared, f"no KafkaTopic for {sorted(touched - declared)}"
    # ... which is what the overlay itself says (not only what the chart was given).
    plan = topology(overlay)
    assert touched == {t for b in plan.brokers for t in (*b.reads, *b.writes)}
    assert yaml.safe_load(configmap["data"]["overlay.yaml"]) == yaml.safe_load(yaml.safe_dump(overlay.to_dict()))

    apps = broker_apps(docs)
    assert sorted(apps) == overlay.brokers
    for broker, app in apps.items():
        assert app["spec"]["arguments"] == ["--broker", broker, "--overlay", "/etc/onyx/overlay.yaml"]
        assert app["spec"]["mainApplicationFile"].endswith("/broker/job.py")
        assert app["spec"]["restartPolicy"]["type"] == "Always"
    names = [d["metadata"]["name"] for kind in docs.values() for d in kind]
    assert all("." not in n and n == n.lower() for n in names)


def test_topic_settings_follow_their_kind(helm):
    docs = by_kind(render(builtin("figure4"), helm=helm))
    spec = {t["spec"]["topicName"]: t["spec"] for t in docs["KafkaTopic"]}
    assert spec["onyx.catalog"]["config"]["cleanup.policy"] == "compact"
    assert spec["onyx.profiles"]["config"]["cleanup.policy"] == "compact"
    assert "cleanup.policy" not in spec["onyx.broker.b1"].get("config", {})
    assert {t["metadata"]["labels"]["strimzi.io/cluster"] for t in docs["KafkaTopic"]} == {
        docs["Kafka"][0]["metadata"]["name"]}


def test_per_broker_overrides_and_checkpoint_volumes(helm, tmp_path):
    values = tmp_path / "values.yaml"
    values.write_text("brokers: {overrides: {b1: {executor: {instances: 4}}}}\n")
    docs = by_kind(render(builtin("figure4"), values_files=[values], helm=helm))
    apps = {broker: a["spec"] for broker, a in broker_apps(docs).items()}
    assert apps["b1"]["executor"]["instances"] == 4 and apps["b2"]["executor"]["instances"] == 1
    claims = {c["metadata"]["name"] for c in docs["PersistentVolumeClaim"]}
    for spec in apps.values():
        (volume,) = [v for v in spec["volumes"] if v["name"] == "checkpoints"]
        assert volume["persistentVolumeClaim"]["claimName"] in claims


def test_registration_service_probes_health_and_keeps_sqlite_on_a_volume(helm):
    docs = by_kind(render(builtin("figure4"), helm=helm))
    (deployment,) = docs["Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert args[:2] == ["onyx", "serve"] and args[args.index("--overlay") + 1] == "/etc/onyx/overlay.yaml"
    assert args[args.index("--bootstrap-servers") + 1] == "$(ONYX_KAFKA_BOOTSTRAP)"
    parsed = build_parser().parse_args(args[1:])  # the real `onyx` command line accepts them
    assert (parsed.command, parsed.host, parsed.port) == ("serve", "0.0.0.0", 8080)
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    env = {e["name"]: e for e in container["env"]}
    assert env["ONYX_KAFKA_BOOTSTRAP"]["value"].endswith("-kafka-bootstrap:9092")
    assert env["ONYX_DATABASE_URL"]["value"].startswith("sqlite:////var/lib/onyx/")
    assert deployment["spec"]["strategy"]["type"] == "Recreate"


def _archive(docs) -> tuple[dict | None, dict | None]:
    """(the archive writer's SparkApplication, its PersistentVolumeClaim), None when not rendered."""
    def named(kind):
        found = [d for d in docs.get(kind, []) if d["metadata"]["name"] == "onyx-archive"]
        assert len(found) <= 1
        return found[0] if found else None
    return named("SparkApplication"), named("PersistentVolumeClaim")


def _registry_pod(docs) -> tuple[dict, dict]:
    """(pod spec, container) of the registration service."""
    (deployment,) = docs["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return pod, container


def _env(env: list[dict]) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in env}


def _driver_affinity(spec: dict, app: dict) -> list[dict]:
    """The required pod-affinity terms of ``spec`` that pin it to ``app``'s driver's node."""
    driver_labels = {**app["spec"]["driver"]["labels"], "spark-role": "driver"}
    terms = spec.get("affinity", {}).get("podAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", [])
    return [t for t in terms if t["topologyKey"] == "kubernetes.io/hostname"
            and t["labelSelector"]["matchLabels"].items() <= driver_labels.items()]


def test_archive_writer_runs_as_a_spark_application_on_its_volume(helm, monkeypatch):
    """Issue 30: the archive writer is a SparkApplication of its own whose driver (checkpoint)
    and executors (archive) mount the archive's claim, kept on uninstall."""
    docs = by_kind(render(builtin("figure4"), helm=helm))
    app, claim = _archive(docs)
    spec = app["spec"]
    main_file = spec["mainApplicationFile"]
    assert main_file == "local:///opt/onyx/broker/archive_job.py"
    assert (CHART_DIR.parents[2] / main_file.removeprefix("local:///opt/onyx/")).is_file()  # the image's /opt/onyx
    assert spec["restartPolicy"]["type"] == "Always"
    assert spec["sparkVersion"] == broker_apps(docs)["b1"]["spec"]["sparkVersion"]          # one image
    assert spec["driver"]["serviceAccount"] == broker_apps(docs)["b1"]["spec"]["driver"]["serviceAccount"]
    (volume,) = spec["volumes"]
    assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"] and claim["spec"]["resources"]["requests"]["storage"]
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"

    for role in ("driver", "executor"):
        (mount,) = [m for m in spec[role]["volumeMounts"] if m["name"] == volume["name"]]
        env = _env(spec[role]["env"])
        archive_dir, checkpoint = env["ONYX_ARCHIVE_DIR"], env["ONYX_CHECKPOINT_DIR"]
        # Both on the claim, neither inside the other (the archive's folders are its sources).
        assert all(d.startswith(mount["mountPath"].rstrip("/") + "/") for d in (archive_dir, checkpoint))
        assert not archive_dir.startswith(checkpoint + "/") and not checkpoint.startswith(archive_dir + "/")
        assert env["ONYX_KAFKA_BOOTSTRAP"] == "onyx-kafka-bootstrap:9092" and not mount.get("readOnly")
        assert "ONYX_ARCHIVE_TRIGGER" not in env                                 # the job's own default
        # A new claim is root's: the pods' group (the image's user) may write it.
        assert spec[role]["podSecurityContext"]["fsGroup"] == 185
    # ... and the real entry point takes its settings from that environment.
    for name, value in env.items():
        if value is not None:
            monkeypatch.setenv(name, value)
    from broker import archive_job
    args = archive_job.build_parser().parse_args([])
    assert (str(args.directory), str(args.checkpoint), args.bootstrap_servers) == (
        archive_dir, checkpoint, "onyx-kafka-bootstrap:9092")

    docs = by_kind(render(builtin("figure4"), set_values=["archive.trigger=10 seconds"], helm=helm))
    app, _ = _archive(docs)
    assert _env(app["spec"]["executor"]["env"])["ONYX_ARCHIVE_TRIGGER"] == "10 seconds"


def test_registration_service_reads_the_archive_from_the_writers_volume(helm):
    docs = by_kind(render(builtin("figure4"), helm=helm))
    app, claim = _archive(docs)
    pod, container = _registry_pod(docs)
    (volume,) = [v for v in pod["volumes"] if v.get("persistentVolumeClaim", {}).get("claimName") == "onyx-archive"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    archive_dir = _env(container["env"])["ONYX_ARCHIVE_DIR"]
    # The folder the executors write, at the same path.
    assert archive_dir == _env(app["spec"]["executor"]["env"])["ONYX_ARCHIVE_DIR"]
    assert archive_dir.startswith(mount["mountPath"].rstrip("/") + "/")
    # Its readers open the files in write modes (archive/locks.py): a read-only mount would fail them.
    assert not mount.get("readOnly")


def test_a_read_write_once_archive_volume_puts_its_users_on_the_writers_driver_node(helm):
    docs = by_kind(render(builtin("figure4"), helm=helm))
    app, _ = _archive(docs)
    pod, _ = _registry_pod(docs)
    assert _driver_affinity(app["spec"]["executor"], app) and _driver_affinity(pod, app)
    # ... and a restarted driver prefers the node where the registry holds the volume.
    (preferred,) = app["spec"]["driver"]["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred["podAffinityTerm"]["labelSelector"]["matchLabels"].items() <= (
        docs["Deployment"][0]["spec"]["template"]["metadata"]["labels"].items())

    docs = by_kind(render(builtin("figure4"), set_values=["archive.volume.accessMode=ReadWriteMany"], helm=helm))
    app, claim = _archive(docs)
    pod, _ = _registry_pod(docs)
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert all("affinity" not in spec for spec in (app["spec"]["driver"], app["spec"]["executor"], pod))


def test_without_the_archive_nothing_of_it_is_rendered(helm):
    docs = by_kind(render(builtin("figure4"), set_values=["archive.enabled=false"], helm=helm))
    assert _archive(docs) == (None, None)
    assert "onyx-archive" not in _users(docs)
    pod, container = _registry_pod(docs)
    assert "ONYX_ARCHIVE_DIR" not in _env(container["env"]) and "affinity" not in pod    # time travel answers 503
    assert not any(v.get("persistentVolumeClaim", {}).get("claimName") == "onyx-archive" for v in pod["volumes"])
    assert sorted(broker_apps(docs)) == builtin("figure4").brokers


def test_the_registrys_service_monitor_is_rendered_only_when_asked_for(helm):
    assert "ServiceMonitor" not in by_kind(render(builtin("figure4"), helm=helm))
    docs = by_kind(render(builtin("figure4"), set_values=["registry.serviceMonitor.enabled=true",
                                                          "registry.serviceMonitor.labels.release=prometheus"],
                          helm=helm))
    [monitor] = docs["ServiceMonitor"]
    [service] = [s for s in docs["Service"] if s["metadata"]["name"] == "onyx-registry"]
    # /metrics needs the operator token: Prometheus sends it from the token's Secret
    assert monitor["spec"]["endpoints"] == [{"port": "http", "path": "/metrics", "interval": "30s",
                                             "scrapeTimeout": "10s", "authorization": {
                                                 "type": "Bearer", "credentials": {"name": "onyx-admin-token",
                                                                                   "key": "token"}}}]
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["spec"]["selector"].items()
    assert "http" in [p["name"] for p in service["spec"]["ports"]]


@pytest.mark.parametrize("bad, complaint", [
    ("registry.replicas=2", "/registry/replicas"),                    # SQLite is one file
    ("kafka.nodePool.replicas=0", "/kafka/nodePool/replicas"),
    ("brokers.checkpoints.type=nfs", "/brokers/checkpoints/type"),
    ("brokers.executer.instances=2", "executer"),                      # a typo is not ignored
    ("archive.volume.sise=5Gi", "sise"),
    ("archive.volume.accessMode=ReadWriteOncePod", "/archive/volume/accessMode"),  # executors and the registry share it
    ("archive.trigger=soon", "/archive/trigger"),
    ("registry.serviceMonitor.interval=often", "/registry/serviceMonitor/interval"),
])
def test_values_schema_rejects_bad_values(helm, bad, complaint):
    with pytest.raises(deploy_render.DeployError, match=complaint):
        render(builtin("figure4"), set_values=[bad], helm=helm)


def test_names_too_long_for_the_spark_operator_are_refused(helm):
    long_id = "broker-with-a-rather-long-name-0123456789"
    ov = Overlay.from_dict({"brokers": ["b1", long_id], "links": [["b1", long_id]]})
    with pytest.raises(deploy_render.DeployError, match="longer than 56 characters"):
        render(ov, release="production-eu-west", helm=helm)


def test_cli_renders_and_reports_a_bad_overlay_in_one_line(helm, tmp_path):
    # Broker `y` is a boolean to Helm's YAML 1.1 reader unless the generated values quote it.
    good = tmp_path / "pair.yaml"
    good.write_text("brokers: [x, y]\nlinks: [[x, y]]\nsources: [{id: feed, root: x}]\n")
    out = subprocess.run([sys.executable, "-m", "broker.cli", "deploy", "render", "--overlay", str(good),
                          "--helm", helm], capture_output=True, text=True, check=True).stdout
    assert {a["metadata"]["name"] for a in by_kind(out)["SparkApplication"]} == {"onyx-broker-x", "onyx-broker-y",
                                                                                "onyx-archive"}

    bad = tmp_path / "bad.yaml"
    bad.write_text("brokers: [x, y]\nlinks: [[x, z]]\n")
    proc = subprocess.run([sys.executable, "-m", "broker.cli", "deploy", "render", "--overlay", str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().count("\n") == 0 and "unknown broker 'z'" in proc.stderr


def test_image_constraints_pin_every_runtime_dependency():
    deps = tomllib.loads((CHART_DIR.parents[2] / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower().replace("_", "-") for d in deps}
    pinned = {line.split("==")[0].lower().replace("_", "-")
              for line in (CHART_DIR.parents[1] / "image" / "constraints.txt").read_text().splitlines()
              if "==" in line and not line.startswith("#")}
    assert names <= pinned, f"add to deploy/image/constraints.txt: {sorted(names - pinned)}"


def test_image_holds_every_package_of_the_project():
    """The image's jobs import them: the archive writer (broker/archive_job.py) and the
    registration service's time travel need `archive`, say."""
    project = tomllib.loads((CHART_DIR.parents[2] / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    copied = set(re.findall(r"^COPY (\w+)/ \1/$", (CHART_DIR.parents[1] / "image" / "Containerfile").read_text(),
                            re.MULTILINE))
    assert packages <= copied, f"add to deploy/image/Containerfile: COPY {sorted(packages - copied)}"


def _allowed(user: dict, operation: str, topic: str) -> bool:
    """Kafka's simple authorizer for one user's topic ACLs: a matching deny rule wins,
    else any matching allow rule grants (literal names, '*', prefixes)."""
    def matches(rule):
        res = rule["resource"]
        if res["type"] != "topic" or not ({operation, "All"} & set(rule["operations"])):
            return False
        if res.get("patternType", "literal") == "prefix":
            return topic.startswith(res["name"])
        return res["name"] in (topic, "*")
    rules = [r for r in user["spec"]["authorization"]["acls"] if matches(r)]
    return bool(rules) and not any(r.get("type") == "deny" for r in rules)


def _users(docs) -> dict[str, dict]:
    return {u["metadata"]["name"]: u for u in docs.get("KafkaUser", [])}


def _auth_env(env: list[dict]) -> tuple[str | None, str | None]:
    """(user, Secret holding its password) a workload authenticates to Kafka with."""
    by_name = {e["name"]: e for e in env}
    if "ONYX_KAFKA_USERNAME" not in by_name:
        return None, None
    return by_name["ONYX_KAFKA_USERNAME"]["value"], by_name["ONYX_KAFKA_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"]


SECURITY = """
security:
  enabled: true
  deliveryTopicPrefixes: [alerts.]
  publishers: [{name: wire, sources: [news]}, {name: all}]
  subscribers: [{name: alice, id: s1, topics: [alerts.sf]}, {name: bob, id: s2}]
"""


def test_kafka_users_let_each_party_touch_only_its_topics(helm, overlay, tmp_path):
    """Issue 24 in a deployment: Kafka authenticates everyone and its ACLs keep brokers out
    of the source topics and the compacted state, publishers out of everything but their
    sources, and subscribers out of everything but their own deliveries."""
    values = tmp_path / "security.yaml"
    values.write_text(SECURITY)
    docs = by_kind(render(overlay, values_files=[values], helm=helm))
    (kafka,) = docs["Kafka"]
    assert kafka["spec"]["kafka"]["authorization"]["type"] == "simple"
    assert {lst["authentication"]["type"] for lst in kafka["spec"]["kafka"]["listeners"]} == {"scram-sha-512"}
    assert "userOperator" in kafka["spec"]["entityOperator"]
    users = _users(docs)
    assert all(u["spec"]["authentication"]["type"] == "scram-sha-512" for u in users.values())
    plan = topology(overlay)
    source = topics.source_topic(sorted(overlay.sources)[0])
    internal_never_written = [topics.source_topic("any"), source, topics.CATALOG, topics.PROFILES,
                              "onyx.catalog-v2", "onyx.profiles.tmp"]

    apps = broker_apps(docs)
    for b in plan.brokers:
        user = users[f"onyx-broker-{b.key}"]
        assert all(_allowed(user, "Read", t) for t in b.reads)
        assert all(_allowed(user, "Write", t) for t in b.writes)
        assert _allowed(user, "Write", "onyx.deliver.s1") and _allowed(user, "Write", "alerts.sf")
        assert not any(_allowed(user, "Write", t) for t in internal_never_written), b.id
        assert not _allowed(user, "Write", "payments") and not _allowed(user, "Read", "onyx.deliver.s1")
        for role in ("driver", "executor"):
            assert _auth_env(apps[b.id]["spec"][role]["env"]) == (f"onyx-broker-{b.key}",) * 2

    registry = users["onyx-registry"]
    assert all(_allowed(registry, "Write", t) for t in (topics.broker_topic(overlay.brokers[0]), topics.CATALOG,
                                                        topics.PROFILES))
    assert _allowed(registry, "Create", "onyx.deliver.s9") and _allowed(registry, "Create", "alerts.nyc")
    assert not _allowed(registry, "Create", "payments") and not _allowed(registry, "Write", source)
    # it reads its own logs at start, the deliveries it pushes (SSE, webhooks) and, for a backfill,
    # the brokers' state logs; never a source's or a broker's inbound records
    assert all(_allowed(registry, "Read", t) for t in (topics.PROFILES, topics.METADATA, "onyx.deliver.s1",
                                                       "alerts.sf", topics.DEAD_LETTER,
                                                       topics.state_topic(overlay.brokers[0])))
    assert not any(_allowed(registry, "Read", t) for t in (source, topics.broker_topic(overlay.brokers[0])))
    # a webhook's failed delivery goes to the dead letters; a backfill delivers archived matches
    assert all(_allowed(registry, "Write", t) for t in (topics.DEAD_LETTER, "onyx.deliver.s1", "alerts.sf"))
    assert not _allowed(registry, "Write", "payments")
    (deployment,) = docs["Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert _auth_env(container["env"]) == ("onyx-registry", "onyx-registry")

    wire, everything = users["onyx-pub-wire"], users["onyx-pub-all"]
    everyone = [topics.source_topic(s) for s in overlay.sources]
    assert all(_allowed(everything, "Write", t) for t in everyone)
    assert [t for t in everyone if _allowed(wire, "Write", t)] == ([source] if "news" in overlay.sources else [])
    for publisher in (wire, everything):
        assert not any(_allowed(publisher, op, t) for op in ("Read", "Write")
                       for t in (topics.broker_topic(overlay.brokers[0]), topics.PROFILES, "onyx.deliver.s1"))

    # The archive writer reads every source (those registered later too) and the profile log, writes nothing.
    archive = users["onyx-archive"]
    assert all(_allowed(archive, "Read", t) for t in (*everyone, topics.source_topic("later"), topics.PROFILES))
    assert not any(_allowed(archive, "Read", t) for t in (topics.broker_topic(overlay.brokers[0]), topics.CATALOG,
                                                          "onyx.deliver.s1", "payments"))
    assert not any(_allowed(archive, "Write", t) for t in (*internal_never_written, *everyone, "onyx.deliver.s1",
                                                           topics.broker_topic(overlay.brokers[0]), "payments"))
    assert {"type": "group", "name": "spark-kafka-source-", "patternType": "prefix"} in [
        r["resource"] for r in archive["spec"]["authorization"]["acls"] if r.get("type", "allow") == "allow"]
    (writer,) = [a for a in docs["SparkApplication"] if a["metadata"]["name"] == "onyx-archive"]
    for role in ("driver", "executor"):
        assert _auth_env(writer["spec"][role]["env"]) == ("onyx-archive", "onyx-archive")

    alice, bob = users["onyx-sub-alice"], users["onyx-sub-bob"]
    assert all(_allowed(alice, "Read", t) for t in ("onyx.deliver.s1", "onyx.deliver.s1.urgent", "alerts.sf"))
    assert not any(_allowed(alice, "Read", t) for t in ("onyx.deliver.s2", "onyx.deliver.s10", "onyx.deliver.s10.x",
                                                        source, topics.broker_topic(overlay.brokers[0]), "alerts.nyc"))
    assert _allowed(bob, "Read", "onyx.deliver.s2") and not _allowed(bob, "Read", "alerts.sf")
    assert not any(_allowed(u, "Write", t) for u in (alice, bob) for t in ("onyx.deliver.s1", source, "alerts.sf"))


def test_without_security_kafka_is_open_and_nobody_authenticates(helm):
    docs = by_kind(render(builtin("figure4"), set_values=["security.enabled=false"], helm=helm))
    (kafka,) = docs["Kafka"]
    assert "KafkaUser" not in docs and "authorization" not in kafka["spec"]["kafka"]
    assert not any("authentication" in lst for lst in kafka["spec"]["kafka"]["listeners"])
    (deployment,) = docs["Deployment"]
    assert _auth_env(deployment["spec"]["template"]["spec"]["containers"][0]["env"]) == (None, None)


@pytest.mark.parametrize("bad, complaint", [
    ("security.deliveryTopicPrefixes[0]=onyx.src.", "deliveryTopicPrefixes"),   # never the overlay's own topics
    ("security.deliveryTopicPrefixes[0]=ONYX_", "deliveryTopicPrefixes"),
    ("security.subscribers[0].name=alice", "id"),                              # a subscriber's user needs its id
    ("security.publishers[0].name=Bad_Name", "name"),
])
def test_values_schema_rejects_bad_security_values(helm, bad, complaint):
    with pytest.raises(deploy_render.DeployError, match=complaint):
        render(builtin("figure4"), set_values=[bad], helm=helm)


def test_rendered_kafka_users_hold_exactly_the_rules_of_broker_deploy_acls(helm, overlay, tmp_path):
    """One source: for the same overlay, publishers, subscribers and delivery topic prefixes,
    the chart's KafkaUsers hold the rules broker/deploy/acls.py gives (what `onyx up --secure`
    puts into a local Kafka), in the same order."""
    values = tmp_path / "security.yaml"
    values.write_text(SECURITY)
    users = _users(by_kind(render(overlay, values_files=[values], helm=helm)))

    def rules(name):
        return [acls.Rule.from_strimzi(a) for a in users[name]["spec"]["authorization"]["acls"]]
    prefixes = ["alerts."]
    expected = {f"onyx-broker-{b.key}": acls.broker_rules(overlay, b.id, prefixes) for b in topology(overlay).brokers}
    expected |= {"onyx-registry": acls.registry_rules(overlay, prefixes), "onyx-archive": acls.archive_rules(overlay),
                 "onyx-pub-wire": acls.publisher_rules(["news"]),
                 "onyx-pub-all": acls.publisher_rules(sorted(s["id"] for s in overlay.to_dict().get("sources", []))),
                 "onyx-sub-alice": acls.subscriber_rules("s1", ["alerts.sf"]), "onyx-sub-bob": acls.subscriber_rules("s2")}
    assert sorted(users) == sorted(expected)
    for name, want in expected.items():
        assert rules(name) == want, name


def _admin_token_secret(docs) -> dict | None:
    found = [s for s in docs.get("Secret", []) if s["metadata"]["name"] == "onyx-admin-token"]
    return found[0] if found else None


def test_the_operator_token_is_generated_when_none_is_given_and_reaches_the_registry(helm):
    """Closed by default: a random token in a Secret of the chart's, mounted as ONYX_ADMIN_TOKEN."""
    tokens = []
    for _ in range(2):
        docs = by_kind(render(builtin("figure4"), helm=helm))
        secret = _admin_token_secret(docs)
        tokens.append(base64.b64decode(secret["data"]["token"]).decode())
        _, container = _registry_pod(docs)
        env = {e["name"]: e for e in container["env"]}
        assert env["ONYX_ADMIN_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "onyx-admin-token", "key": "token"}
    # `helm template` cannot look up the installed Secret (`helm upgrade` keeps it): a new token each time
    assert all(len(t) >= 32 for t in tokens) and tokens[0] != tokens[1]

    docs = by_kind(render(builtin("figure4"), set_values=["registry.adminToken.value=an-operator-token-0123"],
                          helm=helm))
    assert base64.b64decode(_admin_token_secret(docs)["data"]["token"]) == b"an-operator-token-0123"

    docs = by_kind(render(builtin("figure4"), set_values=["registry.adminToken.existingSecret=ops-token"], helm=helm))
    assert _admin_token_secret(docs) is None
    _, container = _registry_pod(docs)
    env = {e["name"]: e for e in container["env"]}
    assert env["ONYX_ADMIN_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "ops-token", "key": "token"}


def test_the_registry_answers_to_its_service_names_its_pod_ip_and_the_hosts_given(helm, tmp_path):
    values = tmp_path / "hosts.yaml"
    values.write_text("registry: {allowedHosts: [onyx.lb.example.org], ingress: {enabled: true, host: onyx.example.org}}\n"
                      "security: {deliveryTopicPrefixes: [alerts., partners.]}\n")
    docs = by_kind(render(builtin("figure4"), values_files=[values], namespace="prod", helm=helm))
    _, container = _registry_pod(docs)
    env = [e["name"] for e in container["env"]]
    values_of = _env(container["env"])
    hosts = values_of["ONYX_ALLOWED_HOSTS"].split(",")
    assert hosts == ["onyx-registry", "onyx-registry.prod", "onyx-registry.prod.svc",
                     "onyx-registry.prod.svc.cluster.local", "$(POD_IP)", "onyx.example.org", "onyx.lb.example.org"]
    # $(POD_IP) expands only from a variable defined before it: the downward API's pod IP (kubelet probes)
    assert env.index("POD_IP") < env.index("ONYX_ALLOWED_HOSTS")
    (pod_ip,) = [e for e in container["env"] if e["name"] == "POD_IP"]
    assert pod_ip["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert values_of["ONYX_DELIVERY_TOPIC_PREFIXES"] == "alerts.,partners."
    (service,) = [s for s in docs["Service"] if s["metadata"]["name"] == "onyx-registry"]
    assert service["metadata"]["name"] in hosts


def test_notes_say_how_to_read_the_operator_token(helm):
    out = subprocess.run([helm, "install", "onyx", str(CHART_DIR), "--dry-run=client", "-n", "onyx"],
                         capture_output=True, text=True, check=True).stdout
    notes = out.split("NOTES:", 1)[1]
    assert "kubectl get secret -n onyx onyx-admin-token -o jsonpath='{.data.token}' | base64 -d" in notes


@pytest.mark.parametrize("bad, complaint", [
    ("registry.adminToken.value=short", "/registry/adminToken/value"),        # a guessable token is refused
    ("registry.allowedHosts[0]=http://x", "/registry/allowedHosts/0"),
    ("registry.adminToken.secret=x", "secret"),
])
def test_values_schema_rejects_bad_registry_access_values(helm, bad, complaint):
    with pytest.raises(deploy_render.DeployError, match=complaint):
        render(builtin("figure4"), set_values=[bad], helm=helm)
