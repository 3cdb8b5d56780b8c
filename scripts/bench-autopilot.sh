#!/usr/bin/env bash
# The autopilot's numbers (issue 61) on the sim's night with the starting
# policies turned live (config/policies.example.toml): every GPU incident
# remedied with no key pressed, each drain sent within one interval of the
# source that read it + 2 s of its first reading, nothing past the breaker
# (no refusal but the breaker's own pages), and the leaf switch paged
# exactly once and resolved when quiet (a local PagerDuty Events v2
# stand-in counts the events).
#
#   scripts/bench-autopilot.sh          # SPEED=20 INTERVAL=1s FOR=160s
#
# Prints one markdown table; docs/performance.md has results.
set -euo pipefail
cd "$(dirname "$0")/.."
SPEED=${SPEED:-20}
INTERVAL=${INTERVAL:-1s}
FOR=${FOR:-160s}
cargo build --release --quiet
NS=$PWD/target/release/nightshift
DIR=$(mktemp -d)
trap 'kill $PD_PID 2>/dev/null || true; rm -rf "$DIR"' EXIT
# The PagerDuty stand-in: accepts Events v2 and writes each to events.jsonl.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 - "$PORT" "$DIR/events.jsonl" <<'PY' &
import http.server, json, sys
port, out = int(sys.argv[1]), sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(out, "a") as f:
            f.write(json.dumps(json.loads(body)) + "\n")
        self.send_response(202); self.send_header("Content-Type", "application/json"); self.end_headers()
        self.wfile.write(b'{"status":"success","message":"Event processed"}')
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
PY
PD_PID=$!
sed 's/mode = "shadow"/mode = "live"/' config/policies.example.toml > "$DIR/config.toml"
printf '\n[paging.pagerduty]\nrouting_key = "0123456789abcdef0123456789abcdef"\nurl = "http://127.0.0.1:%s/v2/enqueue"\n' "$PORT" >> "$DIR/config.toml"
chmod 600 "$DIR/config.toml"
"$NS" --config "$DIR/config.toml" --audit-log "$DIR/audit.jsonl" --log-file "$DIR/ns.log" \
  --speed "$SPEED" autopilot --interval "$INTERVAL" --for "$FOR" > "$DIR/out.txt"
python3 - "$DIR" "$INTERVAL" <<'PY'
import json, re, sys
d, interval = sys.argv[1], sys.argv[2]
out = open(f"{d}/out.txt").read()
recs = [json.loads(l) for l in open(f"{d}/audit.jsonl")]
drains = [r for r in recs if r["phase"] == "intent" and r["action"] == "drain"]
outcomes = [r for r in recs if r["phase"] == "outcome"]
lags = [float(m) for m in re.findall(r"sent ([0-9.]+) s after its first reading", out)]
try:
    events = [json.loads(l) for l in open(f"{d}/events.jsonl")]
except FileNotFoundError:
    events = []
iv = float(interval.rstrip("s"))
print("| what | measured | target |")
print("|---|---|---|")
print(f"| GPU incidents drained by `policy:gpu-faults` | {len(drains)} ({', '.join(r['target'] for r in drains)}) | every one |")
print(f"| outcomes all ok | {all(o['outcome']['ok'] for o in outcomes)} | yes |")
print(f"| first reading → drain sent | max {max(lags):.2f} s, mean {sum(lags)/len(lags):.2f} s | ≤ {iv + 2:.1f} s |" if lags else "| first reading → drain sent | none measured | |")
refusals = [l for l in out.splitlines() if "a person decides" in l and "fabric" not in l]
print(f"| pages other than the switch's | {len(refusals)} | 0 (under the breaker) |")
acts = [e["event_action"] for e in events]
print(f"| PagerDuty events for the leaf switch | {', '.join(acts) or 'none'} | trigger, resolve |")
PY
