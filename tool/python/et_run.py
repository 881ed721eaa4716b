"""Run a method of a .pte in ExecuTorch 1.3.1 on tensors from a safetensors file and save
its outputs (output.0, output.1, ...).

Usage: et_run.py PROGRAM.pte INPUTS.safetensors INPUT_KEYS OUT.safetensors [METHOD]
INPUT_KEYS is one key or a comma-separated list (method inputs in order); METHOD defaults
to forward.
"""

import sys

import numpy as np
from safetensors.numpy import load_file, save_file

import executorch_numpy_runtime as et

pte, inputs, keys, out = sys.argv[1:5]
method = sys.argv[5] if len(sys.argv) > 5 else "forward"
tensors = load_file(inputs)
program = et.Runtime.get().load_program(open(pte, "rb").read())
result = program.load_method(method)([tensors[k] for k in keys.split(",")])
save_file({f"output.{i}": np.ascontiguousarray(r) for i, r in enumerate(result)}, out)
