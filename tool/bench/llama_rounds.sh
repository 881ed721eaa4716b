#!/usr/bin/env bash
# The llama benchmark (tool/bench/llama.sh) several times in a row, then each cell's median,
# min and max ratio over the rounds: on a shared VM one round's ratios swing by ±10 % (the same
# kernel measured twice differs that much), so a verdict on "at least as fast" needs several.
#
#   bash tool/bench/llama_rounds.sh [ROUNDS] [llama.sh options]    # ROUNDS defaults to 5
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${1:-5}
[ $# -gt 0 ] && shift
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
for i in $(seq 1 "$rounds"); do
    echo "round $i of $rounds ($(date -u +%H:%M:%S) UTC, load average $(cut -d' ' -f1 /proc/loadavg))" >&2
    bash "$repo/tool/bench/llama.sh" "$@" > "$logs/round$i.txt" 2>&1 || { cat "$logs/round$i.txt" >&2; exit 1; }
done
"$repo/.venv/bin/python" - "$logs" "$rounds" <<'PY'
import re, statistics, sys
from pathlib import Path
logs, rounds = Path(sys.argv[1]), int(sys.argv[2])
row = re.compile(r"^(\S+)\s+(\S+)\s+(\d+)\s+\|\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+\|\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+\|")
cells = {}
for i in range(1, rounds + 1):
    text = (logs / f"round{i}.txt").read_text()
    if "WARNING: a run got only" in text:
        print(f"round {i}: another process took CPU time during the round (its figures are kept, marked *)")
    for line in text.splitlines():
        m = row.match(line)
        if m:
            key = (m[1], m[2], int(m[3]))
            cells.setdefault(key, []).append((float(m[6]), float(m[9]), float(m[7]), float(m[8])))
print(f"\nmedian over {rounds} rounds (ratio = rbuild / llama.cpp; min–max of the rounds' ratios)")
print(f"{'rbuild':7s} {'llama.cpp':9s} thr | {'decode tok/s rbuild / llama.cpp':32s} | decode ratio (min–max)  | prefill ratio (min–max)")
for (q, qt, n), v in cells.items():
    pre = [x[0] for x in v]
    dec = [x[1] for x in v]
    ours = statistics.median(x[2] for x in v)
    theirs = statistics.median(x[3] for x in v)
    print(f"{q:7s} {qt:9s} {n:3d} | {ours:13.1f} / {theirs:<16.1f} | {statistics.median(dec):5.2f} ({min(dec):.2f}–{max(dec):.2f})       "
          f"| {statistics.median(pre):5.2f} ({min(pre):.2f}–{max(pre):.2f})")
PY
