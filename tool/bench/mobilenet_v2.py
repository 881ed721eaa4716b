"""MobileNetV2 fp32, 1 thread: rbuild vs ExecuTorch 1.3.1 (XNNPACK and portable programs),
in the same run. Prints medians and ratios. Both processes are pinned to one core
(taskset -c 0) so ExecuTorch's thread pool cannot use a second one.

Usage: mobilenet_v2.py RBUILD_BINARY TESTDATA_DIR [--repeat N]
"""

import argparse
import re
import statistics
import subprocess
import sys
import time

import numpy as np
from safetensors.numpy import load_file

import executorch_numpy_runtime as et


def et_median(path, inputs, repeat):
    program = et.Runtime.get().load_program(open(path, "rb").read())
    method = program.load_method("forward")
    for _ in range(3):
        out = method(inputs)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = method(inputs)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times), np.asarray(out[0])


def rbuild_median(binary, pte, io, repeat, out_path):
    cmd = ["taskset", "-c", "0", binary, "run", pte, "--inputs", io, "--repeat", str(repeat), "--threads", "1", "--output", out_path]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return float(re.search(r"median ([0-9.]+) ms", text).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rbuild")
    ap.add_argument("testdata")
    ap.add_argument("--repeat", type=int, default=30)
    a = ap.parse_args()
    d = f"{a.testdata}/models/mobilenet_v2"
    io = load_file(f"{d}/model.io.safetensors")
    inputs = [io["input.0"]]
    ref = io["output.0"]

    ours = rbuild_median(a.rbuild, f"{d}/model.pte", f"{d}/model.io.safetensors", a.repeat, "/tmp/rbuild_bench_out.safetensors")
    ours_out = load_file("/tmp/rbuild_bench_out.safetensors")["output.0"]
    xnn, xnn_out = et_median(f"{d}/model.xnnpack.pte", inputs, a.repeat)
    port, port_out = et_median(f"{d}/model.pte", inputs, max(3, a.repeat // 10))

    print("MobileNetV2 fp32 [1,3,224,224], 1 core (taskset -c 0), median latency")
    print(f"  rbuild (model.pte, our kernels)         {ours:9.2f} ms   max|err| vs PyTorch {np.abs(ours_out - ref).max():.2e}")
    print(f"  ExecuTorch 1.3.1 XNNPACK (xnnpack.pte)  {xnn:9.2f} ms   max|err| vs PyTorch {np.abs(xnn_out - ref).max():.2e}")
    print(f"  ExecuTorch 1.3.1 portable (model.pte)   {port:9.2f} ms   max|err| vs PyTorch {np.abs(port_out - ref).max():.2e}")
    print(f"  ratio rbuild / XNNPACK   = {ours / xnn:.2f}x   (target <= 2x)")
    print(f"  ratio rbuild / portable  = {ours / port:.3f}x")


if __name__ == "__main__":
    sys.exit(main())
