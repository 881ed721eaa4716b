#!/bin/sh
# one_cpu.sh CMD…: runs CMD in a private mount namespace where /sys reports a single CPU.
# ExecuTorch's thread pool sizes itself from the CPUs the machine reports, not from the affinity
# mask, so under `taskset -c 0` alone it runs two threads on one core (the second one competing
# for it), which inflates its single-thread latency. Needs root (unshare -m, mount --bind).
set -eu
one=$(mktemp)
echo 0 > "$one"
exec unshare -m sh -c 'for f in possible present online; do mount --bind "$0" /sys/devices/system/cpu/$f; done; shift; exec "$@"' "$one" -- "$@"
