"""The Helm chart rendered by the real helm: topics, brokers, values and their schema."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

import pytest
import yaml

from broker import deploy_render
from broker.cli import build_parser
from broker.deploy_render import CHART_DIR, overlay_values, render
from broker.deploy_topology import topology
from routing.overlay import Overlay, builtin


def by_kind(manifests: str) -> dict[str, list[dict]]:
    docs: dict[str, list[dict]] = {}
    for doc in yaml.safe_load_all(manifests):
        if doc:
            docs.setdefault(doc["kind"], []).append(doc)
    return docs


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

    apps = {a["metadata"]["annotations"]["onyx.io/broker-id"]: a for a in docs["SparkApplication"]}
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
    apps = {a["metadata"]["annotations"]["onyx.io/broker-id"]: a["spec"] for a in docs["SparkApplication"]}
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


@pytest.mark.parametrize("bad, complaint", [
    ("registry.replicas=2", "/registry/replicas"),                    # SQLite is one file
    ("kafka.nodePool.replicas=0", "/kafka/nodePool/replicas"),
    ("brokers.checkpoints.type=nfs", "/brokers/checkpoints/type"),
    ("brokers.executer.instances=2", "executer"),                      # a typo is not ignored
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
    assert {a["metadata"]["name"] for a in by_kind(out)["SparkApplication"]} == {"onyx-broker-x", "onyx-broker-y"}

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
