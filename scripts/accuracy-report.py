#!/usr/bin/env python3
"""The summary of one scripts/accuracy.sh run, from the answers it saved in
OUT: Slurm's reasons and estimates (squeue.txt, squeue-start.txt),
nightshift's (nightshift.json), and the actual starts seen (starts.txt).

    accuracy-report.py OUT T0 VERSION RUN_MIN
"""
import json, sys, statistics, datetime, collections
out, t0, v, run_min = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
def ts(s):
    s = s.strip()
    if s in ("N/A", "Unknown", "", "None"):
        return None
    return int(datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc).timestamp())
slurm_reason = {}
for l in open(f"{out}/squeue.txt"):
    i, r, _ = l.strip().split("|")
    slurm_reason[i] = r
slurm_est = {}
for l in open(f"{out}/squeue-start.txt"):
    i, s = l.strip().split("|")
    slurm_est[i] = ts(s)
actual = {}
for l in open(f"{out}/starts.txt"):
    i, s, st = l.strip().split("|")
    t = ts(s)
    if t and i not in actual and st != "CANCELLED":
        actual[i] = t
ns = {j["id"]: j for j in json.load(open(f"{out}/nightshift.json"))["items"]}
rows = []
inferred_ok = inferred_n = passed = 0
disagree = collections.Counter()
for i, r in slurm_reason.items():
    j = ns.get(i, {})
    est = j.get("estimate") or {}
    nse = est.get("start") if est.get("kind") == "starts" else None
    if r in ("Resources", "Priority"):
        # nightshift's own inference from its plan.
        ours = j.get("inferred_reason") or (
            "None (starts now)" if nse is not None and nse <= t0 else est.get("kind", "-"))
        inferred_n += 1
        if ours == r:
            inferred_ok += 1
        else:
            disagree[(r, ours)] += 1
    else:
        # Held, dependency…: Slurm's facts, which nightshift passes on.
        ours = j.get("reason")
        passed += 1
        if ours != r:
            disagree[(r, ours)] += 1
    rows.append((i, r, ours, nse, slurm_est.get(i), actual.get(i)))
with open(f"{out}/rows.tsv", "w") as f:
    f.write("job\tslurm_reason\tnightshift_reason\tnightshift_eta\tslurm_eta\tactual\n")
    for r in rows:
        f.write("\t".join("" if x is None else str(x) for x in r) + "\n")
def stats(errs):
    if not errs:
        return "-", "-"
    errs = sorted(abs(e) for e in errs)
    p90 = errs[min(len(errs) - 1, int(round(0.9 * (len(errs) - 1))))]
    return f"{statistics.median(errs)/60:.1f} min", f"{p90/60:.1f} min"
n = len(rows)
started = [r for r in rows if r[5] is not None]
ns_err = [r[3] - r[5] for r in started if r[3] is not None]
sl_err = [r[4] - r[5] for r in started if r[4] is not None]
both = [r for r in rows if r[3] is not None and r[4] is not None]
within2 = sum(1 for r in both if abs(r[3] - r[4]) <= 120)
signed = statistics.median([r[3] - r[4] for r in both]) / 60 if both else 0
print(f"| Slurm {v} | {n} pending | Resources/Priority inferred alike {inferred_ok}/{inferred_n}; others passed on {passed} | "
      f"nightshift estimates {sum(1 for r in rows if r[3] is not None)}, Slurm {sum(1 for r in rows if r[4] is not None)} | "
      f"both within 2 min {within2}/{len(both)} (median nightshift − Slurm {signed:+.1f} min) | "
      f"started in {run_min} min: {len(started)} | "
      f"error vs actual, median/p90: nightshift {'/'.join(stats(ns_err))} (n={len(ns_err)}), "
      f"squeue --start {'/'.join(stats(sl_err))} (n={len(sl_err)}) |")
if disagree:
    print()
    print("Disagreements (Slurm's reason → nightshift's):", dict(disagree))
