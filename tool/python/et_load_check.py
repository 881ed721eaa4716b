"""Load a .pte in ExecuTorch 1.3.1 and report how far its loader gets.

Usage: et_load_check.py PROGRAM.pte [SHAPE [METHOD]]

Prints `program: loaded` (or `program: <error>`), then tries METHOD (default `forward`) on zeros
of SHAPE (comma-separated; default 1,3,224,224) and prints `method: ran` or `method: <error>`. ExecuTorch logs the reason (e.g. a backend
that is not registered) on stderr.
"""

import sys

import numpy as np

import executorch_numpy_runtime as et

data = open(sys.argv[1], "rb").read()
try:
    program = et.Runtime.get().load_program(data)
except Exception as e:  # the format was rejected
    print(f"program: {type(e).__name__}: {e}")
    sys.exit(0)
print("program: loaded")
shape = [int(d) for d in sys.argv[2].split(",")] if len(sys.argv) > 2 else [1, 3, 224, 224]
try:
    method = sys.argv[3] if len(sys.argv) > 3 else "forward"
    program.load_method(method)([np.zeros(shape, dtype=np.float32)])
    print("method: ran")
except Exception as e:
    print(f"method: {type(e).__name__}: {e}")
sys.stdout.flush()
