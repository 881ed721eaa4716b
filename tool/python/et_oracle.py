"""Run .pte programs in ExecuTorch 1.3.1 (executorch-numpy-runtime) as an independent oracle.

Usage: et_oracle.py MANIFEST.json
MANIFEST is a list of cases {"label", "pte", "io", "original"?, "atol", "rtol", "outputs"}.
For each case the program runs on `input.N` from `io`; every output must be within
atol/rtol of the reference `output.N` (integers exactly), and, when `original` is given, equal
bit for bit to what the original program gives. Prints one line per failure and a summary;
exits non-zero on any failure.
"""

import json
import sys

import numpy as np
from safetensors.numpy import load_file

import executorch_numpy_runtime as et


def run(runtime, path, inputs):
    with open(path, "rb") as f:
        program = runtime.load_program(f.read())
    method = program.load_method("forward")
    return [np.asarray(o) for o in method(inputs)]


def main():
    cases = json.load(open(sys.argv[1]))
    runtime = et.Runtime.get()
    passed, failures = 0, []
    for c in cases:
        io = load_file(c["io"])
        inputs = [io[f"input.{i}"] for i in range(len([k for k in io if k.startswith("input.")]))]
        try:
            got = run(runtime, c["pte"], inputs)
            ref = run(runtime, c["original"], inputs) if c.get("original") else None
        except Exception as e:  # an ExecuTorch load/execute error is a failure of this case
            failures.append(f"{c['label']}: {type(e).__name__}: {e}")
            continue
        errs = []
        for i in range(c["outputs"]):
            want = io[f"output.{i}"]
            g = got[i]
            if g.shape != want.shape or g.dtype != want.dtype:
                errs.append(f"output.{i}: {g.dtype}{list(g.shape)} vs {want.dtype}{list(want.shape)}")
                continue
            if np.issubdtype(want.dtype, np.floating):
                ok = np.isclose(g, want, atol=c["atol"], rtol=c["rtol"], equal_nan=True) | (g == want)
                if not ok.all():
                    errs.append(f"output.{i}: {int((~ok).sum())} elements outside tolerance")
            elif not np.array_equal(g, want):
                errs.append(f"output.{i}: integer outputs differ")
            if ref is not None and not np.array_equal(g, ref[i], equal_nan=np.issubdtype(g.dtype, np.floating)):
                errs.append(f"output.{i}: differs from the original program's output")
        if errs:
            failures.append(f"{c['label']}: " + "; ".join(errs))
        else:
            passed += 1
    for f in failures:
        print("FAIL", f)
    print(f"executorch 1.3.1 oracle: {passed} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
