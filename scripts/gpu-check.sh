#!/usr/bin/env bash
# Runs nightshift's node agent against the real GPUs of this machine, scrapes
# it the way the console does, and prints what it saw. Needs an NVIDIA
# driver; run it on a GPU node (or the device machine) and paste the output
# into the issue note.
#
#   scripts/gpu-check.sh            # builds in release, listens on 127.0.0.1:19400
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${PORT:-19400}
cargo build --release --quiet
BIN=target/release/nightshift
echo "== nvidia-smi"
nvidia-smi --query-gpu=index,name,uuid,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw --format=csv || true
echo "== agent"
"$BIN" --log-file /tmp/nightshift-agent.log agent --listen "127.0.0.1:$PORT" --interval 2 &
AGENT=$!
trap 'kill $AGENT 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do
  curl -fsS "http://127.0.0.1:$PORT/healthz" && break
  sleep 0.2
done
sleep 3
echo "== /metrics (DCGM families)"
curl -fsS "http://127.0.0.1:$PORT/metrics" | grep -v '^#' | sort
echo "== /events?since=0"
curl -fsS "http://127.0.0.1:$PORT/events?since=0"
echo "== as the console sees it"
"$BIN" --source none --dcgm "http://127.0.0.1:$PORT/metrics" get gpus
echo "== agent log"
tail -n 20 /tmp/nightshift-agent.log
