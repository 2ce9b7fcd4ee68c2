#!/usr/bin/env bash
# install-deb.sh PACKAGE "WHAT IT IS FOR": a Debian package a test needs (kcat, a Kafka client
# nobody here wrote; chromium, the browser the console's test drives headless), installed
# when its command is missing (needs root and apt-get); otherwise the tests that use it are
# skipped, and this says why in one line.
set -u
package=$1 purpose=$2
command -v "$package" >/dev/null 2>&1 && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "note: $package not installed and apt-get not usable as root here; $purpose will be skipped" >&2
  exit 0
fi
echo "==> installing $package from Debian's packages (for $purpose)"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends "$package" >/dev/null 2>&1 \
  || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends "$package" >/dev/null 2>&1; } \
  || echo "note: could not install $package with apt-get; $purpose will be skipped" >&2
exit 0
