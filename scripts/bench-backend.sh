#!/bin/sh
# Benchmarks of `resolvelab backend` and `resolvelab proxy` (docs/bench/backend.md).
# Everything runs on loopback, bounded in time (about 40 s of measurement).
# Usage: scripts/bench-backend.sh [> docs/bench/backend-raw.md]
set -eu
cd "$(dirname "$0")/.."
exec cargo bench -p resolvelab-backend --bench backend
