#!/usr/bin/env bash
# Java (for PySpark, Chapters 7 and 9) and a Redis server (Chapter 9's stream broker), from Debian's packages.
# Idempotent; without root or apt it says why and exits 0, and the Spark and Redis tests skip with that reason.
# default-jre-headless is OpenJDK 17 on Debian 12, the oldest Java that Spark 4 runs on.
exec bash "$(dirname "$0")/../apt-ci.sh" "the Spark and Redis tests" "java redis-server" default-jre-headless redis-server
