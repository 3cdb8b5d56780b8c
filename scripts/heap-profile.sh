#!/usr/bin/env bash
# Where the console's memory goes, by subsystem (issue 42): the console on
# the simulated cluster under heaptrack, then its heap at its peak, each
# allocation given to the subsystem of the nearest frame that names one.
#
#   scripts/heap-profile.sh                 # NODES=10000 JOBS=100000 SECS=300
#   STACKS=1 scripts/heap-profile.sh        # also the 15 biggest stacks
#   SHOW=plan scripts/heap-profile.sh       # the 15 biggest stacks of the
#                                           # subsystems whose name has "plan"
#
# Builds `--profile profiling --features system-alloc` (glibc's malloc:
# heaptrack hooks malloc, and mimalloc would hide every Rust allocation).
# Under glibc the heap reads a little differently from the release build's
# resident size with mimalloc; the shares are what this is for. Needs
# heaptrack (apt-get install heaptrack) and tmux.
set -euo pipefail
cd "$(dirname "$0")/.."
NODES=${NODES:-10000} JOBS=${JOBS:-100000} SECS=${SECS:-300}
command -v heaptrack >/dev/null || { echo "heap-profile.sh: heaptrack is needed" >&2; exit 1; }
cargo build --profile profiling --features system-alloc -q
WORK=$(mktemp -d /tmp/ns-heap-XXXX)
sock="nightshift-heap-$$"
trap 'tmux -L "$sock" kill-server 2>/dev/null || true; rm -rf "$WORK"' EXIT
tmux -L "$sock" new-session -d -x 200 -y 50 \
  "heaptrack -o $WORK/heap $PWD/target/profiling/nightshift --nodes $NODES --jobs $JOBS --speed 1 --log-file $WORK/ns.log; sleep 600"
sleep "$SECS"
tmux -L "$sock" send-keys q
for _ in $(seq 1 60); do
  pgrep -f "target/profiling/nightshift --nodes $NODES" >/dev/null || break
  sleep 1
done
sleep 2
heaptrack_print -f "$WORK"/heap*.zst --flamegraph-cost-type peak -F "$WORK/peak.stacks" >/dev/null 2>&1
echo "# $(date -u +%F): the console at $NODES nodes / $JOBS jobs, ${SECS} s under heaptrack"
python3 - "$WORK/peak.stacks" "${STACKS:-0}" "${SHOW:-}" <<'PY'
import collections, re, sys
rows = []
for line in open(sys.argv[1]):
    stack, _, n = line.rstrip().rpartition(" ")
    rows.append((stack.split(";"), int(n)))
total = sum(n for _, n in rows)
# Checked from the allocating frame up; the first that matches names it.
rules = [
    (r"\(metrics\.rs\)", "snapshot: the sim's GPU readings (a node re-made when read)"),
    (r"new_job|\(layout\.rs\)", "snapshot: the sim's jobs and nodes as laid out"),
    (r"\(scheduler\.rs\)|end_job|finish_jobs|start_on", "snapshot: the sim scheduler's changes"),
    (r"\(plan\.rs\)|\(slots\.rs\)|\(quota\.rs\)", "analysis: the queue's plan (ETAs)"),
    (r"\(blast\.rs\)|\(whatif\.rs\)", "analysis: blast radius and what-if"),
    (r"\(fabric\.rs\)|\(domains\.rs\)|narrowest_domains", "domains and fabric"),
    (r"\(stall\.rs\)", "analysis memory: stall signature"),
    (r"\(rates\.rs\)|\(memory\.rs\)|\(repeat\.rs\)", "analysis memory: ECC rates, job watch, faults"),
    (r"\(kpis\.rs\)|\(sampler\.rs\)", "health numbers (the KPI book)"),
    (r"\(history\.rs\)", "history (the charts)"),
    (r"\(armed\.rs\)", "armed steps"),
    (r"\(base\.rs\)|\(analysis\.rs\)|\(incidents\.rs\)|\(health\.rs\)|\(why\.rs\)|\(options\.rs\)", "analysis: the rest"),
    (r"\(rows\.rs\)|\(index\.rs\)|\(component\.rs\)|nightshift_console::(views|columns)", "console: rows and index"),
    (r"\(buffer\.rs\)|ratatui", "console: ratatui's buffers"),
    (r"recording", "recording"),
]
by = collections.Counter()
other = collections.Counter()
shown = collections.Counter()
for frames, n in rows:
    name, at = None, 0
    for at in range(len(frames) - 1, -1, -1):
        name = next((s for pat, s in rules if re.search(pat, frames[at])), None)
        if name:
            break
    by[name or "other"] += n
    if not name:
        other[";".join(frames[-5:])] += n
    elif sys.argv[3] and sys.argv[3] in name:
        # The frame that named it and its three callers: the leaf frames
        # are the allocator's, the same for every caller.
        shown[" < ".join(reversed(frames[max(at - 3, 0):at + 1]))] += n
print(f"\nheap at its peak: {total / 1e6:.1f} MB\n")
print("| subsystem | at the peak |")
print("|---|---|")
for k, n in by.most_common():
    print(f"| {k} | {n / 1e6:.1f} MB |")
if sys.argv[2] == "1":
    print()
    for k, n in other.most_common(15):
        print(f"{n / 1e6:6.1f} MB  {k[:200]}")
if sys.argv[3]:
    print()
    for k, n in shown.most_common(15):
        print(f"{n / 1e6:6.1f} MB  {k[:400]}")
PY
