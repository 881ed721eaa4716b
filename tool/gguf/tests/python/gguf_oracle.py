"""gguf-py (llama.cpp's Python package) as the oracle for rbuild's GGUF reader (tool/gguf).

    gguf_oracle.py all-types OUT_DIR
        Writes OUT_DIR/all_types.gguf with gguf-py's GGUFWriter: a tensor of every type rbuild
        decodes (and two it does not), metadata of every value type, and the expectations:
        OUT_DIR/metadata.tsv (key, value rendered as rbuild's test renders it),
        OUT_DIR/tensors.tsv (name, type, dims in GGUF order, expected-values file or "-"),
        OUT_DIR/<n>.f32 (expected values, little-endian f32, from gguf-py's dequantize of the
        file read back with GGUFReader).
    gguf_oracle.py rows GGUF OUT_FILE TENSOR ROW...
        Dequantizes the given rows (index over everything but dims[0]) of one tensor of an
        existing file with gguf-py into OUT_FILE (little-endian f32).
    gguf_oracle.py seeds OUT_DIR
        Writes a few small GGUF files as fuzzing seeds.

Tensor data for the types gguf-py can quantize is quantized random floats; for the others
(K-quants, Q8_1, Q8_K) and as a second tensor of every block type it is random bytes with
small finite f16 (Q8_K: f32) scale fields.
"""

import struct
import sys
from pathlib import Path

import numpy as np

import gguf
from gguf import GGMLQuantizationType as T
from gguf import GGUFValueType as V

# ggml's block_q8_1 is {f16 d, f16 s, i8 qs[32]}: 36 bytes (ggml-common.h asserts it).
# gguf-py 0.19 still lists 4 + 4 + 32, from before d and s became f16; writer and reader
# size Q8_1 tensors from this table, so use ggml's size.
gguf.constants.GGML_QUANT_SIZES[T.Q8_1] = (32, 36)

# Byte offsets of each block type's scale fields: (offset, "f16" or "f32").
SCALE_FIELDS = {
    T.Q4_0: [(0, "f16")],
    T.Q4_1: [(0, "f16"), (2, "f16")],
    T.Q5_0: [(0, "f16")],
    T.Q5_1: [(0, "f16"), (2, "f16")],
    T.Q8_0: [(0, "f16")],
    T.Q8_1: [(0, "f16"), (2, "f16")],
    T.Q2_K: [(80, "f16"), (82, "f16")],
    T.Q3_K: [(108, "f16")],
    T.Q4_K: [(0, "f16"), (2, "f16")],
    T.Q5_K: [(0, "f16"), (2, "f16")],
    T.Q6_K: [(208, "f16")],
    T.Q8_K: [(0, "f32")],
}
QUANTIZABLE = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]


def random_blocks(rng, qtype, shape):
    """Random raw blocks for a tensor of row-major `shape`, with finite small scales."""
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    n_blocks = int(np.prod(shape)) // block_size
    blocks = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    for offset, kind in SCALE_FIELDS[qtype]:
        dtype = np.float16 if kind == "f16" else np.float32
        width = np.dtype(dtype).itemsize
        scales = rng.uniform(-0.05, 0.05, size=n_blocks).astype(dtype)
        blocks[:, offset:offset + width] = scales.view(np.uint8).reshape(n_blocks, width)
    return blocks.reshape(*shape[:-1], shape[-1] // block_size * type_size)


def expected_values(tensor):
    """gguf-py's values for a tensor read back by GGUFReader; None for types rbuild refuses."""
    qtype = tensor.tensor_type
    data = np.asarray(tensor.data)
    if qtype in (T.F64, T.I8, T.I16, T.I32, T.I64):
        # gguf-py's dequantize has no case for these; they are values, converted as numpy does
        # (F64 beyond f32's range becomes ±inf).
        with np.errstate(over="ignore"):
            return data.astype(np.float32)
    if qtype == T.Q8_1:
        # No decoder in gguf-py or ggml (it is the dot-product activation type): Q8_0's rule.
        blocks = data.reshape(-1, 36)
        d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
        return d * blocks[:, 4:36].copy().view(np.int8).astype(np.float32)
    if qtype == T.Q8_K:
        # Not in gguf-py either; ggml's dequantize_row_q8_K: x = d * q.
        blocks = data.reshape(-1, 292)
        d = blocks[:, 0:4].copy().view(np.float32)
        return d * blocks[:, 4:260].copy().view(np.int8).astype(np.float32)
    if qtype in (T.IQ2_XXS, T.TQ2_0):
        return None
    return gguf.quants.dequantize(data, qtype)


def typed(vtype, value, sub=None):
    return (vtype, value, sub)


def metadata_entries():
    """(key, typed value) pairs covering every value type, arrays and nested arrays."""
    return [
        ("test.u8", typed(V.UINT8, 200)),
        ("test.i8", typed(V.INT8, -100)),
        ("test.u16", typed(V.UINT16, 60000)),
        ("test.i16", typed(V.INT16, -30000)),
        ("test.u32", typed(V.UINT32, 4000000000)),
        ("test.i32", typed(V.INT32, -2000000000)),
        ("test.f32", typed(V.FLOAT32, 0.1)),
        ("test.bool", typed(V.BOOL, True)),
        ("test.string", typed(V.STRING, "gguf ✓ ünïcode\ttab\nnewline")),
        ("test.u64", typed(V.UINT64, 2**64 - 1)),
        ("test.i64", typed(V.INT64, -(2**63))),
        ("test.f64", typed(V.FLOAT64, 1e300)),
        ("test.array_u8", typed(V.ARRAY, [1, 2, 255], V.UINT8)),
        ("test.array_i16", typed(V.ARRAY, [-1, 2, -32768], V.INT16)),
        ("test.array_u64", typed(V.ARRAY, [0, 2**64 - 1], V.UINT64)),
        ("test.array_f32", typed(V.ARRAY, [0.5, -1e-8, 3.25], V.FLOAT32)),
        ("test.array_f64", typed(V.ARRAY, [0.1, -2.5], V.FLOAT64)),
        ("test.array_bool", typed(V.ARRAY, [True, False, True], V.BOOL)),
        ("test.array_str", typed(V.ARRAY, ["a", "", "é🦀"], V.STRING)),
        # Inner arrays take the types gguf-py infers: int -> i32, float -> f32, str, bool.
        ("test.nested", typed(V.ARRAY, [[1, -2], [3]], V.ARRAY)),
        ("test.nested_str", typed(V.ARRAY, [[["x", "y"]], [["z"]]], V.ARRAY)),
    ]


def render(vtype, value):
    """A value as rbuild's test renders a `Value`: `type:payload`, arrays as `[a,b]`."""
    if vtype == V.ARRAY:
        items = []
        for item in value:
            inner = V.ARRAY if isinstance(item, list) else gguf.GGUFValueType.get_type(item)
            items.append(render(inner, item))
        return "[" + ",".join(items) + "]"
    if vtype == V.FLOAT32:
        return "f32:%08x" % struct.unpack("<I", struct.pack("<f", value))[0]
    if vtype == V.FLOAT64:
        return "f64:%016x" % struct.unpack("<Q", struct.pack("<d", value))[0]
    if vtype == V.BOOL:
        return "bool:%d" % int(value)
    if vtype == V.STRING:
        return "str:" + value.encode("utf-8").hex()
    names = {V.UINT8: "u8", V.INT8: "i8", V.UINT16: "u16", V.INT16: "i16", V.UINT32: "u32",
             V.INT32: "i32", V.UINT64: "u64", V.INT64: "i64"}
    return "%s:%d" % (names[vtype], value)


def render_typed(vtype, value, sub):
    if vtype == V.ARRAY and sub not in (None, V.ARRAY):
        return "[" + ",".join(render(sub, item) for item in value) + "]"
    return render(vtype, value)


def all_types(out_dir):
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "all_types.gguf"
    rng = np.random.default_rng(20250207)
    writer = gguf.GGUFWriter(str(path), "testarch")
    manifest = [("general.architecture", render(V.STRING, "testarch"))]
    writer.add_custom_alignment(64)
    manifest.append(("general.alignment", render(V.UINT32, 64)))
    for key, (vtype, value, sub) in metadata_entries():
        writer.add_key_value(key, value, vtype, sub_type=sub)
        manifest.append((key, render_typed(vtype, value, sub)))

    def normal(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    f16_specials = np.array([0.0, -0.0, 1e-7, -6e-8, 65504.0, np.inf, -np.inf, 1.0], dtype=np.float16)
    tensors = [
        ("f32", normal(3, 5), None),
        ("f32.4d", normal(2, 1, 3, 4), None),
        ("f16", np.concatenate([f16_specials, normal(24).astype(np.float16)]).reshape(4, 8), None),
        ("bf16", gguf.quants.quantize(normal(2, 16) * 1000, T.BF16), T.BF16),
        ("f64", np.array([[0.1, -1e300, 1e-320], [3.0, 2**60 + 1, -0.0]], dtype=np.float64), None),
        ("i8", np.array([-128, -1, 0, 1, 127, 5], dtype=np.int8).reshape(2, 3), None),
        ("i16", np.array([-32768, -1, 0, 32767], dtype=np.int16), None),
        ("i32", np.array([-2**31, 2**24 + 1, 0, 2**31 - 1], dtype=np.int32), None),
        ("i64", np.array([-2**63, 2**40 + 1, 0, 2**63 - 1, 2**53 + 1, -7], dtype=np.int64).reshape(3, 2), None),
    ]
    for qtype in QUANTIZABLE:
        name = qtype.name.lower()
        tensors.append((name, gguf.quants.quantize(normal(4, 64), qtype), qtype))
        tensors.append((name + ".raw", random_blocks(rng, qtype, (3, 64)), qtype))
    tensors.append(("q8_1.raw", random_blocks(rng, T.Q8_1, (2, 64)), T.Q8_1))
    for qtype in (T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.Q8_K):
        tensors.append((qtype.name.lower() + ".raw", random_blocks(rng, qtype, (2, 512)), qtype))
    tensors.append(("q4_k.3d", random_blocks(rng, T.Q4_K, (2, 3, 256)), T.Q4_K))
    tensors.append(("iq2_xxs", np.zeros((1, 66), dtype=np.uint8), T.IQ2_XXS))
    tensors.append(("tq2_0", gguf.quants.quantize(normal(1, 256), T.TQ2_0), T.TQ2_0))
    for name, data, raw_dtype in tensors:
        writer.add_tensor(name, data, raw_dtype=raw_dtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    with open(out_dir / "metadata.tsv", "w", encoding="utf-8") as f:
        for key, rendered in manifest:
            f.write(f"{key}\t{rendered}\n")
    reader = gguf.GGUFReader(str(path))
    with open(out_dir / "tensors.tsv", "w", encoding="utf-8") as f:
        for index, tensor in enumerate(reader.tensors):
            values = expected_values(tensor)
            expected = "-"
            if values is not None:
                expected = f"{index}.f32"
                np.ascontiguousarray(values, dtype="<f4").tofile(out_dir / expected)
            dims = ",".join(str(int(d)) for d in tensor.shape)
            f.write(f"{tensor.name}\t{tensor.tensor_type.name}\t{dims}\t{expected}\n")


def rows(gguf_path, out_file, tensor_name, *row_indices):
    reader = gguf.GGUFReader(gguf_path)
    tensor = next(t for t in reader.tensors if t.name == tensor_name)
    data = np.asarray(tensor.data)
    data = data.reshape(-1, data.shape[-1])
    picked = data[[int(r) for r in row_indices]]
    values = gguf.quants.dequantize(picked, tensor.tensor_type)
    np.ascontiguousarray(values, dtype="<f4").tofile(out_file)


def seeds(out_dir):
    """Small files for the fuzzer: each readable type, metadata of each value type, a llama
    header shaped like a real model's, a custom alignment, and version 2."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)

    def write(name, fill, alignment=None):
        path = out_dir / name
        writer = gguf.GGUFWriter(str(path), "llama")
        if alignment is not None:
            writer.add_custom_alignment(alignment)
        fill(writer)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        return path

    def legacy(writer):
        writer.add_tensor("f32", rng.standard_normal((2, 3)).astype(np.float32))
        writer.add_tensor("f16", rng.standard_normal(4).astype(np.float16))
        writer.add_tensor("i32", np.arange(3, dtype=np.int32))
        writer.add_tensor("bf16", gguf.quants.quantize(rng.standard_normal(4).astype(np.float32), T.BF16), raw_dtype=T.BF16)
        for qtype in QUANTIZABLE:
            writer.add_tensor(qtype.name, random_blocks(rng, qtype, (1, 32)), raw_dtype=qtype)
        writer.add_tensor("Q8_1", random_blocks(rng, T.Q8_1, (1, 32)), raw_dtype=T.Q8_1)

    def k_quants(writer):
        for qtype in (T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.Q8_K):
            writer.add_tensor(qtype.name, random_blocks(rng, qtype, (1, 256)), raw_dtype=qtype)

    def metadata(writer):
        for key, (vtype, value, sub) in metadata_entries():
            writer.add_key_value(key, value, vtype, sub_type=sub)

    def llama(writer):
        writer.add_block_count(1)
        writer.add_context_length(64)
        writer.add_embedding_length(32)
        writer.add_head_count(2)
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("smollm")
        writer.add_token_list(["<s>", "</s>", "a", "b", "ab"])
        writer.add_token_types([3, 3, 1, 1, 1])
        writer.add_token_merges(["a b"])
        writer.add_bos_token_id(0)
        writer.add_chat_template("{{ messages }}")
        writer.add_tensor("token_embd.weight", random_blocks(rng, T.Q8_0, (5, 32)), raw_dtype=T.Q8_0)
        writer.add_tensor("blk.0.attn_q.weight", random_blocks(rng, T.Q4_1, (32, 32)), raw_dtype=T.Q4_1)
        writer.add_tensor("output_norm.weight", np.ones(32, dtype=np.float32))

    write("legacy.gguf", legacy)
    write("k_quants.gguf", k_quants)
    write("metadata.gguf", metadata)
    write("llama.gguf", llama)
    path = write("aligned_64.gguf", legacy, alignment=64)
    v2 = bytearray(path.read_bytes())
    v2[4:8] = struct.pack("<I", 2)  # versions 2 and 3 share one layout
    (out_dir / "version_2.gguf").write_bytes(bytes(v2))


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    {"all-types": all_types, "rows": rows, "seeds": seeds}[command](*args)
