#!/usr/bin/env bash
# The Whisper benchmark (tool/bench/whisper.sh) several times in a row, then each cell's median
# figures and ratios with the rounds' min–max: on this shared 2-core VM one round's figures
# swing widely (other processes' compiles take the cores; see each row's CPU share).
#
#   bash tool/bench/whisper_rounds.sh [ROUNDS] [whisper.sh options]    # ROUNDS defaults to 5
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${1:-5}
[ $# -gt 0 ] && shift
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
for i in $(seq 1 "$rounds"); do
    echo "round $i of $rounds ($(date -u +%H:%M:%S) UTC, load average $(cut -d' ' -f1 /proc/loadavg))" >&2
    # the numpy check is the same every round: only the first round runs it
    extra=(); [ "$i" -gt 1 ] && extra=(--skip-check)
    bash "$repo/tool/bench/whisper.sh" "$@" "${extra[@]}" > "$logs/round$i.txt" 2>&1 || { cat "$logs/round$i.txt" >&2; exit 1; }
    grep -E "^  (check|WARNING|rbuild rows skipped)" "$logs/round$i.txt" >&2 || true
done
"$repo/.venv/bin/python" - "$logs" "$rounds" <<'PY'
import re, statistics, sys
from pathlib import Path
logs, rounds = Path(sys.argv[1]), int(sys.argv[2])
num = r"([\d.]+|-)"
row = re.compile(rf"^(tiny|base)\s+(\S+)\s+(\S+)\s+(\d+)\s+\|\s+{num}\s+{num}\s+{num}\s+\|\s+{num}\s+{num}\s+{num}\s+\|\s+{num}\s+{num}\s+{num}\s*$")
cells = {}
for i in range(1, rounds + 1):
    for line in (logs / f"round{i}.txt").read_text().splitlines():
        m = row.match(line)
        if m:
            v = [None if x == "-" else float(x) for x in m.groups()[4:]]
            cells.setdefault((m[1], m[2], m[3], int(m[4])), []).append(v)

def med(vals, i, p=1):
    xs = [v[i] for v in vals if v[i] is not None]
    if not xs:
        return "-"
    return f"{statistics.median(xs):.{p}f} ({min(xs):.{p}f}–{max(xs):.{p}f})"

print(f"\nmedian over {rounds} rounds (min–max of the rounds); ratios > 1: rbuild faster")
print(f"{'cell':24s} | {'whisper.cpp encoder ms':24s} {'decode tok/s':20s} {'RTF':22s} | "
      f"{'encoder ratio':18s} {'decode ratio':18s} {'RTF ratio':18s}")
for (s, q, qt, n), v in cells.items():
    print(f"{s} {q}/{qt} {n}T".ljust(24) + f" | {med(v, 1):24s} {med(v, 4):20s} {med(v, 7, 3):22s} | "
          f"{med(v, 2, 2):18s} {med(v, 5, 2):18s} {med(v, 8, 2):18s}")
PY
