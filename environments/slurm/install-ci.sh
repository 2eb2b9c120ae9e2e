#!/usr/bin/env bash
# Install a real Slurm (slurmctld + slurmd + client commands) and munge for the test suite (Appendix B).
# Idempotent; without root or apt it says why and exits 0, and the Slurm tests skip with that reason.
# slurm-wlm pulls slurmctld, slurmd and the client; --no-install-recommends keeps it small.
exec bash "$(dirname "$0")/../apt-ci.sh" "the Slurm tests" "slurmctld slurmd sbatch munged" slurm-wlm munge
