#!/usr/bin/env bash
# kcat, a Kafka client nobody here wrote, for the end-to-end test that publishes with it.
# Installed from Debian's packages when missing (needs root and apt-get); otherwise the
# test that uses it is skipped, and this says why in one line.
set -u
command -v kcat >/dev/null 2>&1 && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "note: kcat not installed and apt-get not usable as root here; the kcat end-to-end test will be skipped" >&2
  exit 0
fi
echo "==> installing kcat from Debian's packages (for the end-to-end test with a foreign Kafka client)"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends kcat >/dev/null 2>&1 \
  || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends kcat >/dev/null 2>&1; } \
  || echo "note: could not install kcat with apt-get; the kcat end-to-end test will be skipped" >&2
exit 0
