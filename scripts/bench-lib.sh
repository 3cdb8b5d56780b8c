# Shared by the fleet benches (source it): a work folder that goes, with
# the processes and tmux sessions started, when the script exits; readings
# from /proc.
TCK=$(getconf CLK_TCK)
PIDS=()
SESSIONS=()
bench_work() {
  WORK=$(mktemp -d "/tmp/$1-XXXX")
  trap bench_cleanup EXIT
}
bench_cleanup() {
  for s in "${SESSIONS[@]}"; do tmux kill-session -t "$s" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# CPU seconds a process has used (user + system).
cpu() { awk -v t="$TCK" '{ printf "%.2f", ($14+$15)/t }' "/proc/$1/stat"; }
rss_mb() { awk '/VmRSS/ { printf "%d", $2/1024 }' "/proc/$1/status"; }
now() { date +%s.%N; }
