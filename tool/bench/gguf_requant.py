"""Rewrites a GGUF model file with its 2-D weights in another block type (Q4_0 or Q8_0),
keeping every metadata entry (architecture, tokenizer, chat template) and the 1-D tensors
(norms) as they are: the same real model in the formats llama.cpp and rbuild both run
natively, for `llama_bench.py gguf`.

usage: gguf_requant.py IN.gguf q4_0|q8_0 OUT.gguf
"""
import os
import sys

import numpy as np
import gguf


def main():
    src, kind, out = sys.argv[1], sys.argv[2], sys.argv[3]
    qtype = {"q4_0": gguf.GGMLQuantizationType.Q4_0, "q8_0": gguf.GGMLQuantizationType.Q8_0}[kind]
    ftype = {"q4_0": gguf.LlamaFileType.MOSTLY_Q4_0, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[kind]
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    tmp = out + ".tmp"
    w = gguf.GGUFWriter(tmp, arch)
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture", "general.file_type"):
            continue
        vtype = field.types[0]
        value = field.contents()
        if vtype == gguf.GGUFValueType.ARRAY:
            w.add_key_value(name, value, vtype, sub_type=field.types[-1])
        else:
            w.add_key_value(name, value, vtype)
    w.add_file_type(ftype)
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape.tolist())]  # numpy order: rows first
        values = gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape).astype(np.float32)
        if len(shape) == 2:
            w.add_tensor(t.name, gguf.quants.quantize(values, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(t.name, values)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, out)
    print(out)


if __name__ == "__main__":
    main()
