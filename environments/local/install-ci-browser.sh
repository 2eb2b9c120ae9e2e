#!/usr/bin/env bash
# Install Debian's headless Chromium and its ChromeDriver for the browser test of `scaleout lab`.
# Idempotent: returns at once when both are present. Needs root and apt-get; elsewhere it says why and
# exits 0, and the browser test skips with that reason.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  echo "install-ci-browser: chromium and chromedriver already installed"
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-ci-browser: needs root and apt-get to install chromium (the browser test will skip)"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
echo "install-ci-browser: installed chromium and chromium-driver"
