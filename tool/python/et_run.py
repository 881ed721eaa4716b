"""Run a .pte's `forward` in ExecuTorch 1.3.1 on one tensor and save output.0.

Usage: et_run.py PROGRAM.pte INPUTS.safetensors INPUT_KEY OUT.safetensors
"""

import sys

import numpy as np
from safetensors.numpy import load_file, save_file

import executorch_numpy_runtime as et

pte, inputs, key, out = sys.argv[1:5]
program = et.Runtime.get().load_program(open(pte, "rb").read())
result = program.load_method("forward")([load_file(inputs)[key]])
save_file({"output.0": np.ascontiguousarray(result[0])}, out)
