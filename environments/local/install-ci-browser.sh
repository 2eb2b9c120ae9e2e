#!/usr/bin/env bash
# Install Debian's headless Chromium and its ChromeDriver for the browser test of `scaleout lab`.
# Idempotent; without root or apt it says why and exits 0, and the browser test skips with that reason.
exec bash "$(dirname "$0")/../apt-ci.sh" "the browser test" "chromium chromedriver" chromium chromium-driver
