#!/usr/bin/env bash
# Install Debian packages a part of the test suite needs, once: apt-ci.sh WHAT "COMMANDS" PACKAGE...
# Returns at once when every command is on PATH (or in /usr/sbin). Needs root and apt-get; elsewhere it
# says why and exits 0, and the tests that need WHAT skip with that reason.
set -euo pipefail
what=$1 commands=$2
shift 2
need=()
for cmd in $commands; do
  command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || need+=("$cmd")
done
if [ ${#need[@]} -eq 0 ]; then
  echo "install-ci: $* already installed"
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-ci: missing ${need[*]}; needs root and apt-get to install ($what will skip)"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "$@" >/dev/null
echo "install-ci: installed $*"
