#!/usr/bin/env bash
# `make k8s-validate`: lint and render the Helm chart, then validate every manifest with
# kubeconform -strict against the Kubernetes, Strimzi and Spark Operator schemas of
# .tools/schemas (no cluster needed). Three cases:
#   default     the chart's values.yaml (built-in six-broker figure4 overlay)
#   geometric20 a 20-broker, 2-source random geometric overlay, rendered by `onyx deploy render`
#   options     figure4 with the non-default branches on (PostgreSQL, 2 registry replicas,
#               ingress, object-store checkpoints, per-broker override, external Kafka,
#               publishers per source, subscribers' Kafka users, custom delivery topic prefixes,
#               the operator token from an existing Secret, more host names for the registry,
#               a ReadWriteMany archive volume with its own trigger, the registry's ServiceMonitor)
# The ServiceMonitor (monitoring.coreos.com/v1) is the one kind kubeconform is told to skip:
# no package registry this project fetches from ships the Prometheus Operator's CRD schema
# (crd_schemas.py builds Strimzi's and the Spark Operator's from their packages), so it is
# rendered and linted by helm but not schema-checked; `-skip ServiceMonitor` names only it.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${K8S_VERSIONS:?}"
helm=.tools/bin/helm
kubeconform=.tools/bin/kubeconform
chart=deploy/helm/onyx
work=.run/k8s-validate
k8s_schemas="$PWD/.tools/schemas/kubernetes/{{ .NormalizedKubernetesVersion }}-local{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json"
crd_schemas="$PWD/.tools/schemas/crds/{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json"
rm -rf "$work" && mkdir -p "$work"

.venv/bin/python -c "from routing.generators import random_geometric; random_geometric(20, sources=2).dump('$work/geometric20.yaml')"
.venv/bin/onyx deploy render --values-only --overlay "$work/geometric20.yaml" -o "$work/geometric20.values.yaml"
cat > "$work/options.values.yaml" <<'VALUES'
kafka: {create: false, clusterName: shared-kafka, bootstrapServers: "shared-kafka-kafka-bootstrap.kafka:9092"}
topics: {replicas: 3}
brokers:
  overrides: {b1: {executor: {instances: 3, memory: 2g}}}
  checkpoints:
    type: objectStore
    objectStore: {uri: "s3a://onyx-checkpoints/prod", hadoopConf: {fs.s3a.path.style.access: "true"}, credentialsSecret: onyx-s3}
registry:
  replicas: 2
  database: {url: "postgresql+psycopg://onyx:secret@postgres:5432/onyx"}
  ingress: {enabled: true, className: nginx, host: onyx.example.org, tlsSecret: onyx-tls}
  adminToken: {existingSecret: onyx-ops-token}
  allowedHosts: [onyx.lb.example.org]
  serviceMonitor: {enabled: true, interval: 15s, scrapeTimeout: 5s, labels: {release: prometheus}}
security:
  enabled: true
  deliveryTopicPrefixes: [alerts., partners.]
  publishers: [{name: wire, sources: [news]}, {name: everything}]
  subscribers: [{name: alice, id: s3f2a9c0d1e4b5a6f, topics: [alerts.sf]}, {name: bob, id: s0123456789abcdef}]
archive:
  trigger: 10 seconds
  volume: {accessMode: ReadWriteMany, storageClass: nfs, size: 100Gi, keep: false}
VALUES

validate() {  # name, then extra arguments for helm / onyx deploy render
  local name=$1; shift
  local rendered=$work/$name.yaml
  echo "--- $name"
  "$helm" lint --strict --quiet "$chart" "$@" | grep -v '^$' || true
  if [ "$name" = geometric20 ]; then
    .venv/bin/onyx deploy render --overlay "$work/geometric20.yaml" --helm "$helm" -o "$rendered"
  else
    "$helm" template onyx "$chart" "$@" > "$rendered"
  fi
  echo "    $(grep -c '^kind: ServiceMonitor' "$rendered") ServiceMonitors (not schema-checked), $(grep -c '^kind: SparkApplication' "$rendered") SparkApplications, $(grep -c '^kind: KafkaTopic' "$rendered") KafkaTopics, $(grep -c '^kind: KafkaUser' "$rendered") KafkaUsers, $(grep -c '^kind:' "$rendered") objects"
  for version in $K8S_VERSIONS; do
    printf '    kubernetes %s: ' "$version"
    "$kubeconform" -strict -summary -skip ServiceMonitor -kubernetes-version "$version" \
      -schema-location "$k8s_schemas" -schema-location "$crd_schemas" "$rendered"
  done
}

validate default
validate geometric20 -f "$work/geometric20.values.yaml"
validate options -f "$work/options.values.yaml"
echo "k8s-validate: ok (helm lint --strict, helm template, kubeconform -strict; manifests in $work/)"
