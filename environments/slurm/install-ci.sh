#!/usr/bin/env bash
# Install a real Slurm (slurmctld + slurmd + client commands) and munge for the test suite (Appendix B).
# Idempotent: returns at once when everything is present. Needs root and Debian/Ubuntu apt; elsewhere it
# says why and exits 0, and the Slurm tests skip with that reason.
set -euo pipefail
need=()
for cmd in slurmctld slurmd sbatch munged; do
  command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || need+=("$cmd")
done
if [ ${#need[@]} -eq 0 ]; then
  echo "install-ci: slurm and munge already installed"
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-ci: missing ${need[*]}; needs root and apt-get to install (Slurm tests will skip)"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# slurm-wlm pulls slurmctld, slurmd and the client; --no-install-recommends keeps it small.
apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
echo "install-ci: installed slurm-wlm and munge"
