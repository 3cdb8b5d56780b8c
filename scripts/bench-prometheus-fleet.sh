#!/usr/bin/env bash
# A fleet through Prometheus (issue 28): Debian's Prometheus holding a
# synthetic 10,000-node, 80,000-GPU fleet (one federation-style target, the
# shape of dcgm-exporter's series), read by nightshift's fleet path and by
# the every-series query it replaced, side by side in the same run:
#   - Prometheus's CPU seconds per refresh (from /proc, between scrapes);
#   - the one-shot `get nodes` (wall time, peak RSS) both ways;
#   - the console: time to its first useful screen (an incident in the
#     list), its RSS and CPU over WINDOW seconds of refreshes, and the time
#     from `:node NAME` to that node's GPUs read in full.
#
#   scripts/bench-prometheus-fleet.sh            # HOSTS=10000 WINDOW=60
#   SERVE_ONLY=1 scripts/bench-prometheus-fleet.sh   # the loaded server alone
#   PARTS="oneshot console" scripts/bench-prometheus-fleet.sh   # some tables
#   PARTS=incidents RUNS=5 scripts/bench-prometheus-fleet.sh  # one-shots' cost
#
# Needs prometheus (apt-get install prometheus), tmux, python3, ~5 GB free
# memory. Prints markdown; docs/performance.md has results.
set -euo pipefail
cd "$(dirname "$0")/.."
HOSTS=${HOSTS:-10000}
WINDOW=${WINDOW:-60}
SCRAPE=${SCRAPE:-120}
cargo build --release --quiet
NS=$PWD/target/release/nightshift
source scripts/bench-lib.sh
bench_work ns-fleet
SESSIONS=(nsfleet nssteady)

# 1. The fleet: 8 GPUs per host, 10 families, dcgm-exporter's labels.
# Incidents: Xid 79 on three hosts, a DBE on one, four hosts spinning.
python3 - "$HOSTS" > "$WORK/metrics" <<'EOF'
import sys
hosts = int(sys.argv[1])
fams = ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"]
xid = {100, hosts // 5, hosts // 2}
dbe = hosts * 7 // 10
spin = set(range(hosts * 9 // 10, hosts * 9 // 10 + 4))
out = sys.stdout
for f in fams:
    out.write(f"# HELP {f} synthetic\n# TYPE {f} gauge\n")
    for h in range(hosts):
        for g in range(8):
            s = h in spin
            v = {"DCGM_FI_DEV_GPU_UTIL": 100 if s else 60 + (h + g) % 30,
                 "DCGM_FI_PROF_SM_OCCUPANCY": 0.01 if s else 0.4 + ((h * 8 + g) % 40) / 100,
                 "DCGM_FI_PROF_SM_ACTIVE": 0.99 if s else 0.7,
                 "DCGM_FI_DEV_GPU_TEMP": 50 + g,
                 "DCGM_FI_DEV_POWER_USAGE": 550.5,
                 "DCGM_FI_DEV_FB_USED": 61234,
                 "DCGM_FI_DEV_FB_FREE": 20000,
                 "DCGM_FI_DEV_XID_ERRORS": 79 if (h in xid and g == 3) else 0,
                 "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 2 if (h == dbe and g == 1) else 0,
                 "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": 0}[f]
            out.write(f'{f}{{gpu="{g}",UUID="GPU-{h:05d}-{g}",pci_bus_id="00000000:{g:02X}:00.0",'
                      f'device="nvidia{g}",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-{h:05d}",'
                      f'DCGM_FI_DRIVER_VERSION="550.54.15"}} {v}\n')
EOF
echo "fleet page: $(du -h "$WORK/metrics" | cut -f1), $((HOSTS * 8)) GPUs" >&2
HPORT=$(free_port)
(cd "$WORK" && exec python3 -m http.server "$HPORT" --bind 127.0.0.1 >/dev/null 2>&1) &
PIDS+=($!)
PPORT=$(free_port)
URL=http://127.0.0.1:$PPORT
cat > "$WORK/prometheus.yml" <<EOF
global:
  scrape_interval: ${SCRAPE}s
  scrape_timeout: $((SCRAPE - 10))s
scrape_configs:
  - job_name: fleet
    honor_labels: true
    metrics_path: /metrics
    static_configs:
      - targets: ['127.0.0.1:$HPORT']
EOF
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
  --web.listen-address="127.0.0.1:$PPORT" --query.timeout=5m >/dev/null 2>&1 &
PROM=$!
PIDS+=($PROM)
q() { curl -sf --max-time 300 -G "$URL/api/v1/query" --data-urlencode "query=$1"; }
for _ in $(seq 1 300); do
  n=$(q 'count(DCGM_FI_DEV_XID_ERRORS)' 2>/dev/null | python3 -c 'import sys,json; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else 0)' 2>/dev/null || echo 0)
  [ "$n" = "$((HOSTS * 8))" ] && break
  sleep 2
done
[ "$n" = "$((HOSTS * 8))" ] || { echo "Prometheus never held the fleet ($n GPUs)" >&2; exit 1; }
echo "Prometheus holds $n GPUs, resident $(rss_mb $PROM) MB" >&2
# SERVE_ONLY=1: keep the loaded server up for a look by hand (ctrl-c ends it).
if [ "${SERVE_ONLY:-0}" = 1 ]; then
  echo "Prometheus at $URL" >&2
  sleep infinity
fi

# Waits until the last scrape is done and the next is at least $1 s away:
# Prometheus's own CPU then is the queries'.
quiet_for() {
  while :; do
    read -r last dur < <(curl -sf "$URL/api/v1/targets" | python3 -c '
import sys, json, datetime
t = json.load(sys.stdin)["data"]["activeTargets"][0]
ls = t["lastScrape"]
ts = datetime.datetime.fromisoformat(ls[:26].rstrip("Z") + "+00:00").timestamp() if not ls.startswith("0001") else 0
print(ts, t["lastScrapeDuration"])')
    left=$(python3 -c "import time; print(int($last + $SCRAPE - time.time()))")
    busy=$(python3 -c "import time; print(int(time.time() < $last + $dur + 2))")
    if [ "$busy" = 0 ] && [ "$left" -ge "$1" ] && settled; then return; fi
    sleep 2
  done
}
# Whether the server is at rest: under 0.1 s of CPU over 2 s (no garbage
# collection left over from the last big answer, no compaction).
settled() {
  local a b; a=$(cpu $PROM); sleep 2; b=$(cpu $PROM)
  python3 -c "import sys; sys.exit(0 if $b - $a < 0.1 else 1)"
}

# Prometheus CPU seconds of one command, between scrapes.
prom_cpu_of() {
  quiet_for "$1"; shift
  local a b; a=$(cpu $PROM)
  "$@" >/dev/null 2>&1 || true
  sleep 10
  b=$(cpu $PROM)
  python3 -c "print(f'{$b - $a:.2f}')"
}

OLD='{__name__=~"DCGM_FI_DEV_.*|DCGM_FI_PROF_.*"}'
# The every-series answer takes far longer than the default 5 s timeout.
printf '[endpoints]\ntimeout_s = 300\n' > "$WORK/slow.toml"
# PARTS: which tables (cpu oneshot incidents console), all by default.
PARTS=${PARTS:-cpu oneshot incidents console}
part() { [[ " $PARTS " == *" $1 "* ]]; }
if part console; then
# The console on the fleet: first useful screen, then its steady state.
echo
echo "### The console (\`nightshift --source none --prometheus URL\`, 200×50 tmux pane)"
echo
quiet_for 90
tmux kill-session -t nsfleet 2>/dev/null || true
t0=$(now)
tmux new-session -d -s nsfleet -x 200 -y 50 "$NS --source none --prometheus $URL --log-file $WORK/tui.log"
first=""
for _ in $(seq 1 600); do
  if tmux capture-pane -p -t nsfleet | grep -q "XID 79"; then first=$(python3 -c "print(f'{$(now) - $t0:.2f}')"); break; fi
  sleep 0.05
done
TUI=$(pgrep -n -f "^$NS --source none --prometheus $URL")
echo "| | |"
echo "|---|---|"
echo "| first screen with the fleet's incidents | ${first:-never} s |"
# Open a healthy node: its aggregate first, then its GPUs in full (the
# GPU table's own title replaces "in aggregate").
NODE=gpu-$(printf '%05d' $((HOSTS / 3)))
t0=$(now)
tmux send-keys -t nsfleet ":node $NODE" Enter
opened=""
for _ in $(seq 1 200); do
  if tmux capture-pane -p -t nsfleet | grep -q "gpus (enter: gpu detail"; then opened=$(python3 -c "print(f'{$(now) - $t0:.2f}')"); break; fi
  sleep 0.05
done
echo "| \`:node $NODE\` to its GPUs' full readings | ${opened:-never} s |"
tmux send-keys -t nsfleet Escape
sleep 5
c0=$(cpu "$TUI"); r0=$(rss_mb "$TUI")
peak=$r0
for _ in $(seq 1 "$WINDOW"); do
  sleep 1
  r=$(rss_mb "$TUI"); [ "$r" -gt "$peak" ] && peak=$r
done
c1=$(cpu "$TUI"); r1=$(rss_mb "$TUI")
echo "| console resident at start of window / end / peak | $r0 / $r1 / $peak MB |"
echo "| console CPU over ${WINDOW} s | $(python3 -c "print(f'{($c1 - $c0) / $WINDOW * 100:.1f}')") % of a core |"
tmux capture-pane -p -t nsfleet > "$WORK/screen.txt"
head -5 "$WORK/screen.txt" >&2
fi
if part cpu; then
echo
echo "### Prometheus's CPU per refresh ($((HOSTS * 8)) GPUs, same server, same run)"
echo
echo "Each figure: the server's CPU seconds from the query's start to 10 s after it"
echo "(the garbage collection it causes included), between scrapes."
echo
echo "| refresh | Prometheus CPU s (3 runs) |"
echo "|---|---|"
idle=(); old=(); slow=()
for _ in 1 2 3; do
  idle+=("$(prom_cpu_of 30 sleep 10)")
  old+=("$(prom_cpu_of 60 q "$OLD")")
  slow+=("$(prom_cpu_of 30 "$NS" --source none --prometheus "$URL" --log-file "$WORK/cli.log" get nodes -o json)")
done
echo "| idle, 10 s, for scale | ${idle[*]} |"
echo "| every series (the query before issue 28) | ${old[*]} |"
echo "| fleet path, a whole refresh (aggregates, spinning, broken, their nodes in full: one \`get nodes\`) | ${slow[*]} |"
# The console's own refreshes, with everything they cause (the garbage
# collection of what they allocate included): the server's CPU over WINDOW_S
# seconds with the console running, less the same span with no client (the
# scrapes' share), divided by the refreshes the console logged in it.
WINDOW_S=${WINDOW_S:-240}
window_cpu() { local a b; a=$(cpu $PROM); sleep "$WINDOW_S"; b=$(cpu $PROM); python3 -c "print($b - $a)"; }
refreshes() { grep -c "prometheus refresh ($1)" "$2" 2>/dev/null || true; }
quiet_for 30
IDLE=$(window_cpu)
per_refresh() { # mode, extra args
  local mode=$1 log=$WORK/steady-$2.log; shift 2
  rm -f "$log"
  tmux kill-session -t nssteady 2>/dev/null || true
  tmux new-session -d -s nssteady -x 200 -y 50 "NIGHTSHIFT_LOG=debug $NS --source none --prometheus $URL --log-file $log $*"
  sleep 30
  local r0 c r1; r0=$(refreshes "$mode" "$log")
  c=$(window_cpu)
  r1=$(refreshes "$mode" "$log")
  tmux kill-session -t nssteady
  python3 -c "n = $r1 - $r0; print(f'{($c - $IDLE) / max(n, 1):.2f} s ({n} refreshes; {$c:.1f} s in all, {$IDLE:.1f} s idle)')"
}
echo "| fleet path, the console's refreshes over ${WINDOW_S} s, less idle | $(per_refresh fleet fleet) |"
echo "| every series, the console's refreshes over ${WINDOW_S} s, less idle | $(per_refresh 'every series' every --config $WORK/slow.toml --prometheus-every-gpu-max 1000000) |"

fi
if part incidents; then
# One-shot commands' cost to the server (issue 42), RUNS times each: its
# own CPU (query to 10 s after, between scrapes), what it made the server
# allocate (go_memstats_alloc_bytes_total), and whether a garbage
# collection fell in the window. The collection is the server's, of its
# whole ~2 GB heap (2–3 s of CPU here); it comes once per ~2 GB allocated,
# so its share of a command is the command's allocation over that.
gc_and_alloc() {
  curl -sf "$URL/metrics" | awk '/^go_gc_duration_seconds_count/ {g=$2} /^go_memstats_alloc_bytes_total / {a=$2} END {printf "%d %.0f\n", g, a/1e6}'
}
one_cost() { # label, command...
  local label=$1; shift
  quiet_for 60
  local g0 a0 c0 c1 g1 a1
  read -r g0 a0 < <(gc_and_alloc)
  c0=$(cpu $PROM)
  "$@" >/dev/null 2>&1 || true
  sleep 10
  c1=$(cpu $PROM)
  read -r g1 a1 < <(gc_and_alloc)
  echo "| $label | $(python3 -c "print(f'{$c1 - $c0:.2f}')") | $((a1 - a0)) | $((g1 - g0)) |"
}
echo
echo "### One-shot commands: the server's CPU and allocation"
echo
echo "| command | Prometheus CPU s | allocated MB | collections |"
echo "|---|---|---|---|"
for _ in $(seq 1 "${RUNS:-5}"); do
  one_cost "\`get incidents\`" "$NS" --source none --prometheus "$URL" --log-file "$WORK/cli.log" get incidents -o json
done
for _ in $(seq 1 "${RUNS:-5}"); do
  one_cost "\`get nodes\`" "$NS" --source none --prometheus "$URL" --log-file "$WORK/cli.log" get nodes -o json
done
fi
if part oneshot; then
echo
echo "### One-shot \`get nodes -o json\`"
echo
echo "| path | wall s | peak RSS MB | nodes | nodes read per GPU |"
echo "|---|---|---|---|---|"
oneshot() {
  quiet_for 60
  local t0 t1
  t0=$(now)
  /usr/bin/time -f '%M' -o "$WORK/time" "$NS" --config "$WORK/slow.toml" --source none --prometheus "$URL" \
    --log-file "$WORK/cli.log" --prometheus-every-gpu-max "$1" get nodes -o json > "$WORK/nodes.json" 2>"$WORK/err" || true
  t1=$(now)
  python3 - "$WORK/nodes.json" "$(tail -1 "$WORK/time")" "$t0" "$t1" "$2" <<'EOF'
import sys, json
try:
    items = json.load(open(sys.argv[1]))["items"]
except Exception:
    items = None
wall = float(sys.argv[4]) - float(sys.argv[3])
rss = int(sys.argv[2]) // 1024
if items is None:
    print(f"| {sys.argv[5]} | {wall:.1f} | {rss} | failed | |")
else:
    full = sum(1 for n in items if "gpu_summary" not in n)
    print(f"| {sys.argv[5]} | {wall:.1f} | {rss} | {len(items)} | {full} |")
EOF
}
oneshot 4096 "fleet path"
oneshot 1000000 "every series"

fi
