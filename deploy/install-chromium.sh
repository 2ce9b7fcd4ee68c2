#!/usr/bin/env bash
# Chromium, the real browser the console's test drives headless (through Playwright for
# Python, pointed at this browser: Playwright's own browser downloads are not used).
# Installed from Debian's packages when missing (needs root and apt-get); otherwise the
# browser test is skipped, and this says why in one line.
set -u
command -v chromium >/dev/null 2>&1 && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "note: chromium not installed and apt-get not usable as root here; the console's browser test will be skipped" >&2
  exit 0
fi
echo "==> installing chromium from Debian's packages (for the console's browser test)"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 \
  || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1; } \
  || echo "note: could not install chromium with apt-get; the console's browser test will be skipped" >&2
exit 0
