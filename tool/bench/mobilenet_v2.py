"""MobileNetV2 and MobileNetV3-small, fp32 and int8: rbuild vs ExecuTorch 1.3.1's XNNPACK in
the same run. Prints medians and ratios (rbuild / XNNPACK latency: < 1 = rbuild faster).

Rows per model and precision:
  - ExecuTorch 1.3.1 XNNPACK on ExecuTorch's XNNPACK program (model[.int8].xnnpack.pte): the anchor;
  - rbuild on that same program (its `XnnpackBackend` delegate on rbuild's NHWC kernels);
  - rbuild on ExecuTorch's portable program of the same network (model[.int8].pte), on rbuild's
    portable + optimized kernels;
  - rbuild on its own exports of the same weights (fp32): `rbuild export --backend xnnpack`
    (every op in an XnnpackBackend delegate, NHWC kernels) and `--backend cpu` (rbuild's
    portable + optimized NCHW kernels).
The caller pins the process (taskset): `--threads 1` under one core, `--threads 2` under two.
ExecuTorch's thread pool sizes itself from the machine; the pinning is what bounds it.

On a shared machine the speed drifts by tens of percent within a minute, so the anchor and the
XnnpackBackend rows are measured in `--rounds` interleaved rounds (ExecuTorch, then each rbuild
program, `repeat / rounds` runs each): their ms is the median of the round medians, their ratio
the median of the per-round ratios. The slow portable / cpu rows run once.

Usage: mobilenet_v2.py RBUILD_BINARY TESTDATA_DIR [--repeat N] [--rounds R] [--threads T] [--peak-gflops G]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from safetensors.numpy import load_file

import executorch_numpy_runtime as et


def et_runner(path):
    """A loaded ExecuTorch program: call with (inputs, repeat) for (median ms, output 0)."""
    program = et.Runtime.get().load_program(open(path, "rb").read())
    method = program.load_method("forward")

    def run(inputs, repeat):
        for _ in range(3):
            out = method(inputs)
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            out = method(inputs)
            times.append((time.perf_counter() - t) * 1e3)
        return statistics.median(times), np.asarray(out[0])

    return run


def rbuild_median(binary, pte, io, repeat, threads, out_path):
    cmd = [binary, "run", pte, "--inputs", io, "--repeat", str(repeat), "--threads", str(threads), "--output", out_path]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return float(re.search(r"median ([0-9.]+) ms", text).group(1)), load_file(out_path)["output.0"]


def xnnpack_macs(binary, pte):
    """Multiply-accumulates of the program's XNNPACK graph (rbuild inspect --json)."""
    text = subprocess.run([binary, "inspect", pte, "--json"], check=True, capture_output=True, text=True).stdout
    info = json.loads(text)
    return sum((d.get("xnnpack") or {}).get("macs", 0) for m in info["methods"] for d in m["delegates"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rbuild")
    ap.add_argument("testdata")
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds for the anchor and XnnpackBackend rows")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--peak-gflops", type=float, default=0.0, help="this machine's f32 GEMM peak, for the %% of peak column")
    ap.add_argument("--models", default="mobilenet_v2,mobilenet_v3_small")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="rbuild_bench_")
    out_path = os.path.join(tmp, "out.safetensors")
    t = a.threads
    rounds = max(1, a.rounds)
    per = max(3, a.repeat // rounds)
    print(f"MobileNet [1,3,224,224], {t} thread(s) (cores: {sorted(os.sched_getaffinity(0))}), {rounds} interleaved rounds of {per} runs (portable / cpu rows: one median of {max(3, a.repeat // 3)})")
    print(f"  {'program':<58} {'ms':>8} {'vs XNNPACK':>10} {'max|err|':>9} {'GFLOP/s':>8}{'  % peak' if a.peak_gflops else ''}")
    for model in a.models.split(","):
        d = f"{a.testdata}/models/{model}"
        for prec in ["fp32", "int8"]:
            stem = "model" if prec == "fp32" else "model.int8"
            xnn_pte, port_pte, io_path = f"{d}/{stem}.xnnpack.pte", f"{d}/{stem}.pte", f"{d}/{stem}.xnnpack.io.safetensors"
            if not os.path.exists(xnn_pte):
                continue
            io = load_file(io_path)
            ref = io["output.0"]
            macs = xnnpack_macs(a.rbuild, xnn_pte)
            # Programs timed in interleaved rounds against the anchor: ExecuTorch's XNNPACK
            # program through rbuild, and (fp32) rbuild's own XNNPACK export.
            fast = [(f"rbuild XnnpackBackend    {model}/{stem}.xnnpack.pte", xnn_pte)]
            owns = {}
            if prec == "fp32":
                for backend in ["xnnpack", "cpu"]:
                    own = os.path.join(tmp, f"rbuild_{model}_{backend}.pte")
                    subprocess.run(
                        [a.rbuild, "export", "--model", model, "--weights", f"{d}/model.safetensors", "--backend", backend, "--out", own],
                        check=True, capture_output=True,
                    )
                    owns[backend] = own
                fast.append(("rbuild own export        --backend xnnpack", owns["xnnpack"]))
            anchor_run = et_runner(xnn_pte)
            anchor_ms, times, outs = [], {n: [] for n, _ in fast}, {}
            for _ in range(rounds):
                ms, anchor_out = anchor_run([io["input.0"]], per)
                anchor_ms.append(ms)
                for name, pte in fast:
                    ms, outs[name] = rbuild_median(a.rbuild, pte, io_path, per, t, out_path)
                    times[name].append(ms)
            anchor = statistics.median(anchor_ms)
            # (name, ms, ratio to the anchor, output)
            rows = [(f"ExecuTorch 1.3.1 XNNPACK  {model}/{stem}.xnnpack.pte", anchor, 1.0, anchor_out)]
            for name, _ in fast[:1]:
                rows.append((name, statistics.median(times[name]), statistics.median(m / r for m, r in zip(times[name], anchor_ms)), outs[name]))
            if os.path.exists(port_pte):
                ms, out = rbuild_median(a.rbuild, port_pte, io_path, max(3, a.repeat // 3), t, out_path)
                rows.append((f"rbuild portable program  {model}/{stem}.pte", ms, ms / anchor, out))
            for name, _ in fast[1:]:
                rows.append((name, statistics.median(times[name]), statistics.median(m / r for m, r in zip(times[name], anchor_ms)), outs[name]))
            if "cpu" in owns:
                ms, out = rbuild_median(a.rbuild, owns["cpu"], io_path, max(3, a.repeat // 3), t, out_path)
                rows.append(("rbuild own export        --backend cpu", ms, ms / anchor, out))
            for name, ms, ratio, out in rows:
                gflops = 2 * macs / (ms * 1e6)
                # The f32 FMA peak means nothing for int8 arithmetic: no % for those rows.
                peak = (f"  {100 * gflops / a.peak_gflops:6.1f}%" if prec == "fp32" else f"  {'-':>7}") if a.peak_gflops else ""
                err = float(np.abs(np.asarray(out, dtype=np.float32) - ref).max())
                print(f"  {name:<58} {ms:8.2f} {ratio:9.2f}x {err:9.2e} {gflops:8.1f}{peak}")
        print()
    print("vs XNNPACK: rbuild's latency / ExecuTorch XNNPACK's on the same network (target <= 0.9x for the XnnpackBackend rows);")
    print("  interleaved rows: median of the per-round ratios; portable / cpu rows: their median / the anchor's.")
    print("GFLOP/s: 2 x the XNNPACK graph's multiply-accumulates / latency (the same network for every row).")
    if a.peak_gflops:
        print(f"% peak: of this machine's f32 FMA peak ({a.peak_gflops:.0f} GFLOP/s for {t} core(s), widest vectors the kernels use); fp32 rows only.")
    print("max|err|: against the PyTorch reference output.0 (int8: the eager quantize/dequantize graph).")


if __name__ == "__main__":
    sys.exit(main())
