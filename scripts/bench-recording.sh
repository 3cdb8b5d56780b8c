#!/usr/bin/env bash
# A big recording read back (issue 42): the report, `--replay --at`, and a
# jump in the console, each on a recording of the 10,000-node sim.
#
#   scripts/bench-recording.sh                  # NODES=10000 JOBS=100000 SECS=1200 AT=+10m
#   SECS=3600 AT=+30m scripts/bench-recording.sh
#   FILE=/var/tmp/h1.nsrec AT=+30m scripts/bench-recording.sh   # a recording made already
#   BIN=/path/to/other/nightshift scripts/bench-recording.sh    # another build
#   REPORT=0 AT=+34m30s FILE=… scripts/bench-recording.sh       # the jumps only
#
# Prints markdown: wall time and peak resident of `report FILE`, of
# `--replay FILE --at AT get incidents`, and the console's own time for
# `:at AT` (from its log: the playback says how long a move took, the
# seek and what the analysis remembers included). Needs tmux.
set -euo pipefail
cd "$(dirname "$0")/.."
NODES=${NODES:-10000}
JOBS=${JOBS:-100000}
SECS=${SECS:-1200}
AT=${AT:-+10m}
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet
  BIN=$PWD/target/release/nightshift
fi
source scripts/bench-lib.sh
bench_work ns-rec
SESSIONS=(nsrec)

FILE=${FILE:-}
if [ -z "$FILE" ]; then
  FILE=$WORK/night.nsrec
  echo "recording ${SECS}s of the ${NODES}-node sim ..." >&2
  "$BIN" record "$FILE" --nodes "$NODES" --jobs "$JOBS" --sim-seconds "$SECS" >&2
fi
size=$(du -m "$FILE" | cut -f1)

# Wall seconds and peak resident MB of a command.
measure() {
  /usr/bin/time -f "%e %M" -o "$WORK/time" "$@" > "$WORK/out" 2> "$WORK/err" || {
    cat "$WORK/err" >&2
    return 1
  }
  awk '{ printf "%.1f s | %d MB", $1, $2/1024 }' "$WORK/time"
}

echo "| what | wall | peak resident |"
echo "|---|---|---|"
if [ "${REPORT:-1}" != 0 ]; then
  echo "| \`report\` of $FILE ($size MB) | $(measure "$BIN" report "$FILE" -o json) |"
fi
echo "| \`--replay --at $AT get incidents\` | $(measure "$BIN" --replay "$FILE" --at "$AT" get incidents -o json) |"

# The console: open the replay, jump, read the playback's own word.
LOG=$WORK/console.log
tmux new-session -d -s nsrec -x 200 -y 50 \
  "'$BIN' --replay '$FILE' --log-file '$LOG'; sleep 600"
for _ in $(seq 1 120); do
  grep -q "replay" "$LOG" 2>/dev/null && break
  tmux capture-pane -p -t nsrec | grep -q "REPLAY\|replay" && break
  sleep 1
done
sleep 3
tmux send-keys -t nsrec Space
tmux send-keys -t nsrec ":"
tmux send-keys -t nsrec -l "at $AT"
tmux send-keys -t nsrec Enter
for _ in $(seq 1 120); do
  grep -q "replay: moved" "$LOG" 2>/dev/null && break
  sleep 1
done
took=$(grep "replay: moved" "$LOG" | tail -1 | sed -n 's/.*took_ms=\([0-9]*\).*/\1/p')
echo "| the console's \`:at $AT\` (seek, memory and health numbers) | ${took:-?} ms | |"
