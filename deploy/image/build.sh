#!/usr/bin/env bash
# `make image`: build deploy/image/Containerfile with docker or podman, tagged
# ${IMAGE:-onyx}:${TAG:-<version in pyproject.toml>}.
set -euo pipefail
cd "$(dirname "$0")/../.."
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
image=${IMAGE:-onyx}:${TAG:-$version}
test -n "$(ls deploy/jvm/lib/spark-kafka/*.jar 2>/dev/null)" || { echo "error: no connector jars in deploy/jvm/lib/spark-kafka: run make jvm" >&2; exit 1; }
if command -v docker >/dev/null 2>&1; then
  exec docker build -f deploy/image/Containerfile -t "$image" .
elif command -v podman >/dev/null 2>&1; then
  exec podman build -f deploy/image/Containerfile --ignorefile deploy/image/Containerfile.dockerignore -t "$image" .
fi
echo "error: neither docker nor podman found: build the image on a machine that has one (see deploy/image/README.md)" >&2
exit 1
