#!/usr/bin/env bash
# The long fuzzing pass: every property test that feeds arbitrary or
# structure-aware input to a parser or decoder (the Prometheus text format,
# slurmrestd's JSON of every version, GRES and hostlists, the config
# loader, recordings, the Kubernetes objects), with many more cases than
# `cargo test` runs.
#   scripts/fuzz.sh            # 100,000 cases per property (release build)
#   CASES=1000000 scripts/fuzz.sh
# Prints the number of cases and the result; docs/reliability.md records
# the last long run.
set -euo pipefail
cd "$(dirname "$0")/.."
CASES=${CASES:-100000}
# A recording case replays and reports a small night (~10 ms in release):
# a tenth as many.
RECORDING_CASES=${RECORDING_CASES:-$((CASES / 10))}
filters=(fuzz_ never_panics any_escape label_values_round_trip)
echo "fuzz: ${CASES} cases per property (recordings: ${RECORDING_CASES}), filters: ${filters[*]}"
start=$(date +%s)
for f in "${filters[@]}"; do
  PROPTEST_CASES=$CASES cargo test --release --lib -q -- "$f" --skip fuzz_recording 2>&1 | grep -E "^test |test result|panicked|minimal failing"
done
PROPTEST_CASES=$RECORDING_CASES cargo test --release --lib -q -- fuzz_recording 2>&1 | grep -E "^test |test result|panicked|minimal failing"
echo "fuzz: done in $(( $(date +%s) - start )) s"
