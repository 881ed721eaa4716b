"""Llama decode/prefill benchmark: rbuild vs llama.cpp (llama-cpp-python) in the same run.

A stories110M-shaped model (llama2.c's stories110M: dim 768, 12 layers, 12 heads, 12 kv heads,
hidden 2048, vocab 32000, max_seq_len 1024) with seeded random weights is written once in Hugging
Face layout (config.json, model.safetensors, tokenizer.json) for rbuild and as GGUF (F32, Q8_0,
Q4_0, written with the `gguf` package from the same weights) for llama.cpp. Both engines get the
same prompt token ids. Greedy decoding; EOS does not stop either engine's timing loop on our side.

`--shape voxtral-mini` runs the same comparison on Voxtral Mini 3B's text decoder (hidden 3072,
30 layers, 32/8 heads of head_dim 128, vocab 131072, RoPE base 1e8): the decoder Voxtral's
`text_decoder` method runs is the Llama decoder builder with that config, so the llama export
of that shape times the same program ops. Its weights are written as f16 shards (8 GB) and
converted tensor by tensor; the check adds a tiny head_dim-128-style model (head_dim apart from
hidden / heads, RoPE base 1e8) so the GGUF's key/value length keys are proven right too.

Subcommands (llama.sh runs `run`; the others are its building blocks):
  gen DIR [--tiny | --shape S] write the HF folder (random weights, tokenizer)
  gguf DIR TYPE OUT           write DIR's weights as GGUF (f32 | q8_0 | q4_0)
  check WORK                  llama.cpp logits vs a numpy forward of the same weights (tiny config,
                              GQA): proves the GGUF (q/k permutation, tokenizer, metadata) is right
  llamacpp GGUF ...           time llama.cpp (run under taskset by `run`), print JSON
  membw THREADS               streaming-read bandwidth (C probe, see membw.c), print GB/s
  run [options]               everything above, then rbuild's rows, then the table
"""

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

# llama2.c stories110M (max_seq_len 1024 as in its checkpoint).
STORIES110M = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, num_key_value_heads=12,
                   intermediate_size=2048, vocab_size=32000, max_position_embeddings=1024)
# The correctness check's model: GQA (4 heads on 2 kv heads) so the k permutation with n_head_kv is
# exercised; dims multiples of 32 so Q8_0/Q4_0 blocks fit.
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=192, vocab_size=512, max_position_embeddings=256)
# The check's second model: head_dim apart from hidden / heads and a large RoPE base, as Voxtral's
# and Mistral's decoders have (GGUF's key/value length keys, the q/k permutation per head_dim).
TINY_HEAD_DIM = dict(TINY, head_dim=32, rope_theta=1e8)
# Voxtral Mini 3B's text decoder (HF `text_config`): hidden 3072, 30 layers, 32 query / 8 KV heads
# of head_dim 128 (not 3072 / 32), FFN 8192, vocab 131072, RoPE base 1e8; max_seq_len 2048 here.
VOXTRAL_MINI = dict(hidden_size=3072, num_hidden_layers=30, num_attention_heads=32, num_key_value_heads=8,
                    head_dim=128, intermediate_size=8192, vocab_size=131072, max_position_embeddings=2048,
                    rope_theta=1e8)
SHAPES = {"stories110m": STORIES110M, "voxtral-mini": VOXTRAL_MINI}
SHAPE_TEXT = {
    "stories110m": "stories110M shape (dim 768, 12 layers, 12 heads, vocab 32000, max_seq_len 1024)",
    "voxtral-mini": "Voxtral Mini 3B text-decoder shape (dim 3072, 30 layers, 32 heads / 8 KV heads of 128, "
                    "FFN 8192, vocab 131072, RoPE base 1e8, max_seq_len 2048)",
}
# Checkpoints above this many f32 bytes are written as f16 shards (as HF ships large models) and
# converted tensor by tensor, so neither the writer nor the GGUF conversion holds them whole.
SHARD_ABOVE = 2 << 30
SHARD_BYTES = 1 << 30
BOS, EOS, UNK = 1, 2, 0
N_SPECIAL = 3
N_BYTES = 256
RMS_EPS = 1e-5
ROPE_THETA = 10000.0


# ---------------------------------------------------------------- model generation (HF layout)

def hf_config(shape):
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        **shape,
        "head_dim": shape.get("head_dim", shape["hidden_size"] // shape["num_attention_heads"]),
        "hidden_act": "silu",
        "rms_norm_eps": RMS_EPS,
        "rope_theta": shape.get("rope_theta", ROPE_THETA),
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
        "bos_token_id": BOS,
        "eos_token_id": EOS,
        "torch_dtype": "float32",
    }


def head_dim(cfg):
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def random_weights(cfg, seed):
    """HF-named f32 weights, one (name, array) at a time: projections N(0, 1/fan_in) so activations
    keep unit scale through the layers; norm gains around 1 (not exactly 1, so a skipped norm weight
    shows in the check)."""
    rng = np.random.default_rng(seed)
    e, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    h, kvh = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = head_dim(cfg)

    def proj(n, k):
        return rng.standard_normal((n, k), dtype=np.float32) * np.float32(1.0 / np.sqrt(k))

    def gain(n):
        return (1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32)

    yield "model.embed_tokens.weight", rng.standard_normal((v, e), dtype=np.float32)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", gain(e)
        yield p + "self_attn.q_proj.weight", proj(h * d, e)
        yield p + "self_attn.k_proj.weight", proj(kvh * d, e)
        yield p + "self_attn.v_proj.weight", proj(kvh * d, e)
        yield p + "self_attn.o_proj.weight", proj(e, h * d)
        yield p + "post_attention_layernorm.weight", gain(e)
        yield p + "mlp.gate_proj.weight", proj(f, e)
        yield p + "mlp.up_proj.weight", proj(f, e)
        yield p + "mlp.down_proj.weight", proj(e, f)
    yield "model.norm.weight", gain(e)
    yield "lm_head.weight", proj(v, e)


def f32_bytes(cfg):
    e, f, v, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    q, kv = cfg["num_attention_heads"] * head_dim(cfg), cfg["num_key_value_heads"] * head_dim(cfg)
    return 4 * (2 * v * e + L * (2 * q * e + 2 * kv * e + 3 * f * e + 2 * e) + e)


def save_weights(cfg, seed, out):
    """model.safetensors (f32), or for large shapes f16 shards + model.safetensors.index.json."""
    from safetensors.numpy import save_file

    if f32_bytes(cfg) <= SHARD_ABOVE:
        save_file(dict(random_weights(cfg, seed)), str(out / "model.safetensors"))
        return
    shards, current, size = [], {}, 0
    for name, arr in random_weights(cfg, seed):
        current[name] = arr.astype(np.float16)
        size += current[name].nbytes
        if size >= SHARD_BYTES:
            shards.append(current)
            current, size = {}, 0
    if current:
        shards.append(current)
    weight_map = {}
    for k, shard in enumerate(shards):
        file = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(out / file))
        weight_map.update({name: file for name in shard})
    (out / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}, indent=1))


def vocab_pieces(v):
    """Token strings by id: <unk> <s> </s>, the 256 byte tokens, then words w<id>.
    tokenizer.json (WordLevel, whitespace split) uses `w<id>`; the GGUF (SPM) the same words with
    SentencePiece's '▁' prefix. The ids are what both engines are fed, so they agree by construction."""
    if v < N_SPECIAL + N_BYTES + 1:
        raise ValueError(f"vocab_size {v} too small for specials + 256 byte tokens")
    specials = ["<unk>", "<s>", "</s>"]
    return specials + [f"<0x{b:02X}>" for b in range(N_BYTES)] + [f"w{i}" for i in range(N_SPECIAL + N_BYTES, v)]


def tokenizer_json(v):
    pieces = vocab_pieces(v)
    added = [{"id": i, "content": pieces[i], "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i in range(N_SPECIAL)]
    bos = {"SpecialToken": {"id": "<s>", "type_id": 0}}
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}}, bos, {"Sequence": {"id": "B", "type_id": 0}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [BOS], "tokens": ["<s>"]}},
        },
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": {p: i for i, p in enumerate(pieces)}, "unk_token": "<unk>"},
    }


def prompt_ids(n, v):
    """n prompt ids: BOS then n-1 distinct-looking words (a fixed stride through the word range)."""
    words = v - N_SPECIAL - N_BYTES
    return [BOS] + [N_SPECIAL + N_BYTES + (i * 7919) % words for i in range(n - 1)]


def prompt_text(ids, v):
    pieces = vocab_pieces(v)
    return " ".join(pieces[i] for i in ids if i != BOS)


def gen(out, shape, seed):
    """Writes the HF folder unless a folder made from the same shape and seed is already there."""
    out = Path(out)
    stamp = json.dumps({"shape": shape, "seed": seed, "version": 1}, sort_keys=True)
    if (out / "stamp.json").exists() and (out / "stamp.json").read_text() == stamp:
        return out
    out.mkdir(parents=True, exist_ok=True)
    (out / "stamp.json").unlink(missing_ok=True)
    cfg = hf_config(shape)
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": BOS, "eos_token_id": EOS}, indent=2))
    (out / "tokenizer.json").write_text(json.dumps(tokenizer_json(cfg["vocab_size"])))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
        "unk_token": "<unk>", "add_bos_token": True, "model_max_length": cfg["max_position_embeddings"]}, indent=2))
    for old in list(out.glob("model*.safetensors")) + list(out.glob("model.safetensors.index.json")):
        old.unlink()
    save_weights(cfg, seed, out)
    (out / "stamp.json").write_text(stamp)
    return out


class LazyWeights:
    """A checkpoint's tensors by HF name, read (as f32) when asked for: single file or shards."""

    def __init__(self, folder):
        folder = Path(folder)
        index = folder / "model.safetensors.index.json"
        if index.exists():
            self.files = {n: folder / f for n, f in json.loads(index.read_text())["weight_map"].items()}
        else:
            from safetensors import safe_open

            with safe_open(str(folder / "model.safetensors"), "np") as f:
                self.files = {n: folder / "model.safetensors" for n in f.keys()}

    def __getitem__(self, name):
        from safetensors import safe_open

        with safe_open(str(self.files[name]), "np") as f:
            return f.get_tensor(name).astype(np.float32)

    def keys(self):
        return self.files.keys()


def load_hf(folder, lazy=False):
    folder = Path(folder)
    cfg = json.loads((folder / "config.json").read_text())
    w = LazyWeights(folder)
    return cfg, (w if lazy else {n: w[n] for n in w.keys()})


def weights_mtime(folder):
    return max(p.stat().st_mtime for p in Path(folder).glob("model*.safetensors"))


# ---------------------------------------------------------------- GGUF

def permute_qk(w, n_head, n_head_kv=None):
    """convert_hf_to_gguf.py's LlamaModel.permute: HF's rotate_half RoPE pairs dims (i, i+D/2) of
    each head, GGML's LLAMA RoPE pairs (2i, 2i+1); reorder the output rows so both compute the
    same function."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape))


GGUF_TYPES = ("f32", "q8_0", "q4_0")


def write_gguf(folder, qtype, out, permute=True):
    import gguf

    if qtype not in GGUF_TYPES:
        raise ValueError(f"GGUF type {qtype!r}: expected one of {GGUF_TYPES}")
    cfg, w = load_hf(folder, lazy=True)
    e, h, kvh = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = head_dim(cfg)
    ggml_type = {"f32": gguf.GGMLQuantizationType.F32, "q8_0": gguf.GGMLQuantizationType.Q8_0,
                 "q4_0": gguf.GGMLQuantizationType.Q4_0}[qtype]
    ftype = {"f32": gguf.LlamaFileType.ALL_F32, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
             "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0}[qtype]
    out = Path(out)
    tmp = out.with_suffix(".tmp")
    wr = gguf.GGUFWriter(str(tmp), "llama")
    wr.add_name("rbuild-bench-random-llama")
    wr.add_context_length(cfg["max_position_embeddings"])
    wr.add_embedding_length(e)
    wr.add_block_count(cfg["num_hidden_layers"])
    wr.add_feed_forward_length(cfg["intermediate_size"])
    wr.add_head_count(h)
    wr.add_head_count_kv(kvh)
    wr.add_rope_dimension_count(d)
    if d != e // h:
        wr.add_key_length(d)
        wr.add_value_length(d)
    wr.add_rope_freq_base(cfg["rope_theta"])
    wr.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    wr.add_vocab_size(cfg["vocab_size"])
    wr.add_file_type(ftype)
    # SentencePiece-style vocab: llama.cpp's SPM tokenizer wants the <0xXX> byte tokens.
    pieces = vocab_pieces(cfg["vocab_size"])
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + \
        [gguf.TokenType.BYTE] * N_BYTES + [gguf.TokenType.NORMAL] * (len(pieces) - N_SPECIAL - N_BYTES)
    wr.add_tokenizer_model("llama")
    wr.add_token_list([p if t != gguf.TokenType.NORMAL else "\u2581" + p for p, t in zip(pieces, types)])
    wr.add_token_scores([0.0] * (N_SPECIAL + N_BYTES) + [-float(i) for i in range(len(pieces) - N_SPECIAL - N_BYTES)])
    wr.add_token_types(types)
    wr.add_bos_token_id(BOS)
    wr.add_eos_token_id(EOS)
    wr.add_unk_token_id(UNK)
    wr.add_add_bos_token(True)

    def put(name, arr, quant):
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if quant and ggml_type != gguf.GGMLQuantizationType.F32:
            wr.add_tensor(name, gguf.quants.quantize(arr, ggml_type), raw_dtype=ggml_type)
        else:
            wr.add_tensor(name, arr)

    # As convert_hf_to_gguf.py --outtype q8_0 does: every 2-D weight (embedding and output
    # included) in the file type, norms in F32. (llama-quantize would keep output in Q6_K for Q4_0;
    # here all linear layers are Q4_0, the like-for-like pair of rbuild's int4.)
    put("token_embd.weight", w["model.embed_tokens.weight"], True)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        q, k = w[p + "self_attn.q_proj.weight"], w[p + "self_attn.k_proj.weight"]
        if permute:
            q, k = permute_qk(q, h, h), permute_qk(k, h, kvh)
        put(f"blk.{i}.attn_norm.weight", w[p + "input_layernorm.weight"], False)
        put(f"blk.{i}.attn_q.weight", q, True)
        put(f"blk.{i}.attn_k.weight", k, True)
        put(f"blk.{i}.attn_v.weight", w[p + "self_attn.v_proj.weight"], True)
        put(f"blk.{i}.attn_output.weight", w[p + "self_attn.o_proj.weight"], True)
        put(f"blk.{i}.ffn_norm.weight", w[p + "post_attention_layernorm.weight"], False)
        put(f"blk.{i}.ffn_gate.weight", w[p + "mlp.gate_proj.weight"], True)
        put(f"blk.{i}.ffn_up.weight", w[p + "mlp.up_proj.weight"], True)
        put(f"blk.{i}.ffn_down.weight", w[p + "mlp.down_proj.weight"], True)
    put("output_norm.weight", w["model.norm.weight"], False)
    put("output.weight", w["lm_head.weight"], True)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    os.replace(tmp, out)
    return out


def gguf_bytes_per_token(path):
    """Weight bytes one decode step reads: every tensor except the embedding table, of which one
    row is read."""
    import gguf

    r = gguf.GGUFReader(str(path))
    total = 0
    for t in r.tensors:
        if t.name == "token_embd.weight":
            total += int(t.n_bytes) // int(t.shape[-1])  # shape is GGML order [E, V]: one of V rows
        else:
            total += int(t.n_bytes)
    return total


def dequantized_gguf_weights(path):
    """The GGUF's weights back in HF names and layout (q/k un-permuted), dequantized, for the
    numpy reference: lets the check compare llama.cpp's quantized run against the same quantized
    weights computed exactly."""
    import gguf

    r = gguf.GGUFReader(str(path))
    arch = {f.name: f for f in r.fields.values()}
    h = int(arch["llama.attention.head_count"].parts[-1][0])
    kvh = int(arch["llama.attention.head_count_kv"].parts[-1][0])
    out = {}
    for t in r.tensors:
        a = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).astype(np.float32)
        a = a.reshape([int(x) for x in reversed(t.shape)]) if a.ndim != len(t.shape) else a
        out[t.name] = a
    w = {"model.embed_tokens.weight": out["token_embd.weight"], "model.norm.weight": out["output_norm.weight"],
         "lm_head.weight": out["output.weight"]}
    n = 1 + max(int(k.split(".")[1]) for k in out if k.startswith("blk."))

    def unpermute(x, n_head):
        return x.reshape(n_head, x.shape[0] // n_head // 2, 2, *x.shape[1:]).swapaxes(1, 2).reshape(x.shape)

    for i in range(n):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        w[p + "input_layernorm.weight"] = out[b + "attn_norm.weight"]
        w[p + "self_attn.q_proj.weight"] = unpermute(out[b + "attn_q.weight"], h)
        w[p + "self_attn.k_proj.weight"] = unpermute(out[b + "attn_k.weight"], kvh)
        w[p + "self_attn.v_proj.weight"] = out[b + "attn_v.weight"]
        w[p + "self_attn.o_proj.weight"] = out[b + "attn_output.weight"]
        w[p + "post_attention_layernorm.weight"] = out[b + "ffn_norm.weight"]
        w[p + "mlp.gate_proj.weight"] = out[b + "ffn_gate.weight"]
        w[p + "mlp.up_proj.weight"] = out[b + "ffn_up.weight"]
        w[p + "mlp.down_proj.weight"] = out[b + "ffn_down.weight"]
    return w


# ---------------------------------------------------------------- numpy reference forward (HF semantics)

def np_forward(cfg, w, tokens):
    """Logits [S, V] for one sequence from position 0, float64: HF LlamaForCausalLM (rotate_half
    RoPE, GQA by repeat_kv, causal softmax attention, SiLU-gated MLP, RMSNorm)."""
    e, h, kvh = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d, eps, s = head_dim(cfg), cfg["rms_norm_eps"], len(tokens)
    g = {k: v.astype(np.float64) for k, v in w.items()}

    def rms(x, gain):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * gain

    inv = cfg["rope_theta"] ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    freqs = np.outer(np.arange(s, dtype=np.float64), inv)
    cos, sin = np.cos(np.concatenate([freqs, freqs], -1))[:, None], np.sin(np.concatenate([freqs, freqs], -1))[:, None]

    def rope(x):
        rot = np.concatenate([-x[..., d // 2:], x[..., : d // 2]], -1)
        return x * cos + rot * sin

    x = g["model.embed_tokens.weight"][np.asarray(tokens)]
    mask = np.triu(np.full((s, s), -np.inf), 1)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a = rms(x, g[p + "input_layernorm.weight"])
        q = rope((a @ g[p + "self_attn.q_proj.weight"].T).reshape(s, h, d))
        k = rope((a @ g[p + "self_attn.k_proj.weight"].T).reshape(s, kvh, d))
        v = (a @ g[p + "self_attn.v_proj.weight"].T).reshape(s, kvh, d)
        k, v = np.repeat(k, h // kvh, axis=1), np.repeat(v, h // kvh, axis=1)
        sc = np.einsum("shd,thd->hst", q, k) / np.sqrt(d) + mask
        sc = np.exp(sc - sc.max(-1, keepdims=True))
        sc /= sc.sum(-1, keepdims=True)
        o = np.einsum("hst,thd->shd", sc, v).reshape(s, h * d)
        x = x + o @ g[p + "self_attn.o_proj.weight"].T
        a = rms(x, g[p + "post_attention_layernorm.weight"])
        gate = a @ g[p + "mlp.gate_proj.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * (a @ g[p + "mlp.up_proj.weight"].T)) @ g[p + "mlp.down_proj.weight"].T
    return rms(x, g["model.norm.weight"]) @ g["lm_head.weight"].T


# ---------------------------------------------------------------- llama.cpp

def llamacpp_model(path, threads, n_ctx, f32_kv=False, all_logits=False, flash_attn=False):
    import llama_cpp

    kw = dict(model_path=str(path), n_ctx=n_ctx, n_batch=512, n_ubatch=512, n_threads=threads,
              n_threads_batch=threads, seed=0, verbose=False, logits_all=all_logits, flash_attn=flash_attn)
    if f32_kv:
        kw.update(type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32)
    return llama_cpp.Llama(**kw)


def llamacpp_logits(path, tokens, f32_kv=True):
    llm = llamacpp_model(path, 1, max(256, len(tokens)), f32_kv=f32_kv, all_logits=True)
    llm.reset()
    llm.eval(tokens)
    return np.array(llm.scores[: len(tokens)], dtype=np.float64)


def llamacpp_time(path, threads, prompt, new_tokens, repeat, n_ctx, flash_attn=False):
    """Median prefill and decode tok/s. Wall time around llama.cpp's decode calls (Llama.eval),
    greedy argmax included as a runner would; llama.cpp's own perf counters are reported beside."""
    import llama_cpp

    llm = llamacpp_model(path, threads, n_ctx, flash_attn=flash_attn)
    ctx = llm.ctx
    n_vocab = llm.n_vocab()

    def argmax_last():
        # Llama.eval keeps logits only with logits_all; read the last row from the context.
        return int(np.argmax(np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), shape=(n_vocab,))))

    def one():
        llm.reset()
        llama_cpp.llama_perf_context_reset(ctx)
        t0 = time.perf_counter()
        llm.eval(prompt)
        t1 = time.perf_counter()
        tok = argmax_last()
        out = [tok]
        t2 = time.perf_counter()
        for _ in range(new_tokens - 1):
            llm.eval([tok])
            tok = argmax_last()
            out.append(tok)
        t3 = time.perf_counter()
        perf = llama_cpp.llama_perf_context(ctx)
        return dict(prefill_s=t1 - t0, decode_s=t3 - t2, tokens=out,
                    perf_prefill_tok_s=perf.n_p_eval / (perf.t_p_eval_ms / 1e3) if perf.t_p_eval_ms else None,
                    perf_decode_tok_s=perf.n_eval / (perf.t_eval_ms / 1e3) if perf.t_eval_ms else None)

    one()  # warm-up: page in the weights, size the buffers
    runs = [one() for _ in range(repeat)]
    ref = runs[0]["tokens"]
    return {
        "threads": threads,
        "prompt_tokens": len(prompt),
        "decode_tokens": new_tokens - 1,
        "prefill_tok_s": statistics.median(len(prompt) / r["prefill_s"] for r in runs),
        "decode_tok_s": statistics.median((new_tokens - 1) / r["decode_s"] for r in runs),
        "perf_prefill_tok_s": statistics.median(r["perf_prefill_tok_s"] or 0 for r in runs),
        "perf_decode_tok_s": statistics.median(r["perf_decode_tok_s"] or 0 for r in runs),
        "deterministic": all(r["tokens"] == ref for r in runs),
        "generated": ref,
    }


def versions():
    from importlib.metadata import version

    import llama_cpp

    return {"llama-cpp-python": version("llama-cpp-python"), "gguf": version("gguf"), "numpy": np.__version__,
            "llama.cpp system": llama_cpp.llama_print_system_info().decode().strip()}


# ---------------------------------------------------------------- correctness check

def check(work):
    """Tiny GQA model: llama.cpp's logits for a 12-token prompt against the numpy forward, for F32
    (tight) and Q8_0/Q4_0 (numpy on the dequantized GGUF weights; llama.cpp also quantizes the
    activations to 8 bits there, hence the looser bound). A GGUF written without the q/k
    permutation must fail the F32 comparison: shows the check can fail."""
    work = Path(work)
    ok = True
    # The reference itself, against Hugging Face's logits for the shared llama_tiny (when present).
    hf = HERE.parent.parent.parent / "shared" / "testdata" / "models" / "llama_tiny"
    if (hf / "prefill.io.safetensors").exists():
        from safetensors.numpy import load_file

        hcfg, hw = load_hf(hf)
        hcfg.setdefault("rope_theta", hcfg.get("rope_parameters", {}).get("rope_theta", ROPE_THETA))
        io = load_file(str(hf / "prefill.io.safetensors"))
        err = float(np.abs(np_forward(hcfg, hw, io["input.0"][0].tolist()) - io["output.0"][0]).max())
        ok &= err < 1e-4
        print(f"  check numpy reference vs Hugging Face (llama_tiny prefill): max|err| {err:.1e}  {'ok' if err < 1e-4 else 'FAIL'}")
    folder = gen(work / "tiny", TINY, seed=1)
    cfg, w = load_hf(folder)
    tokens = prompt_ids(12, cfg["vocab_size"])
    ref = np_forward(cfg, w, tokens)
    results = {}
    for qt, bound in (("f32", 1e-3), ("q8_0", 0.03), ("q4_0", 0.05)):
        g = write_gguf(folder, qt, work / f"tiny.{qt}.gguf")
        got = llamacpp_logits(g, tokens)
        want = ref if qt == "f32" else np_forward(cfg, dequantized_gguf_weights(g), tokens)
        rel = float(np.sqrt(((got - want) ** 2).mean() / (want ** 2).mean()))
        top1 = float((got.argmax(-1) == want.argmax(-1)).mean())
        results[qt] = (rel, float(np.abs(got - want).max()), top1)
        good = rel < bound and (qt != "f32" or top1 == 1.0)
        ok &= good
        print(f"  check {qt:5s}: llama.cpp vs numpy logits rel RMS {rel:.2e} (bound {bound:g}), max|err| "
              f"{results[qt][1]:.2e}, argmax agreement {top1:.0%}  {'ok' if good else 'FAIL'}")
    g = write_gguf(folder, "f32", work / "tiny.f32.unpermuted.gguf", permute=False)
    got = llamacpp_logits(g, tokens)
    rel = float(np.sqrt(((got - ref) ** 2).mean() / (ref ** 2).mean()))
    neg = rel > 100 * max(results["f32"][0], 1e-6)
    ok &= neg
    print(f"  check without q/k permutation: rel RMS {rel:.2e} ({'differs, as it must' if neg else 'FAIL: no difference'})")
    # head_dim apart from hidden / heads, RoPE base 1e8 (the Voxtral/Mistral decoder shape).
    folder = gen(work / "tiny_head_dim", TINY_HEAD_DIM, seed=2)
    cfg, w = load_hf(folder)
    ref = np_forward(cfg, w, tokens)
    for qt, bound in (("f32", 1e-3), ("q8_0", 0.03)):
        g = write_gguf(folder, qt, work / f"tiny_head_dim.{qt}.gguf")
        got = llamacpp_logits(g, tokens)
        want = ref if qt == "f32" else np_forward(cfg, dequantized_gguf_weights(g), tokens)
        rel = float(np.sqrt(((got - want) ** 2).mean() / (want ** 2).mean()))
        good = rel < bound
        ok &= good
        print(f"  check {qt:5s} head_dim {head_dim(cfg)} (hidden {cfg['hidden_size']} / {cfg['num_attention_heads']} heads), "
              f"RoPE base {cfg['rope_theta']:g}: rel RMS {rel:.2e} (bound {bound:g})  {'ok' if good else 'FAIL'}")
    return ok


# ---------------------------------------------------------------- memory bandwidth

def membw(work, threads):
    """Best-of streaming-read bandwidth in GB/s (1e9 B/s) from membw.c at `threads` threads, run
    under taskset on cores 0..threads-1."""
    exe = Path(work) / "membw"
    src = HERE / "membw.c"
    if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            raise RuntimeError("membw: no C compiler (cc/gcc) to build tool/bench/membw.c")
        subprocess.run([cc, "-O3", "-march=native", "-fopenmp", str(src), "-o", str(exe)], check=True)
    cores = ",".join(str(i) for i in range(threads))
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_PROC_BIND="true")
    text = subprocess.run(["taskset", "-c", cores, str(exe), "512"], check=True, capture_output=True,
                          text=True, env=env).stdout
    return float(re.search(r"([0-9.]+) GB/s", text).group(1))


# ---------------------------------------------------------------- rbuild

QUANTS = {  # rbuild --quant → its llama.cpp pair
    "fp32": "f32", "int8": "q8_0", "int4": "q4_0", "8da4w": "q4_0"}


def rbuild_bytes_per_token(cfg, quant, group, pte=None):
    """Weight bytes per decode step in rbuild's program: the .pte's size less the f32 embedding
    table (the bench exports without --embedding-quant), plus the one row a step reads. Without a
    program, computed from the formats: every linear layer including lm_head, int8 with f32 scales
    per row, int4 with f16 scales per group (what rbuild's quantization pass writes)."""
    if pte is not None and Path(pte).exists():
        e = cfg["hidden_size"]
        return Path(pte).stat().st_size - 4 * cfg["vocab_size"] * e + 4 * e
    e, f, v, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    d = head_dim(cfg)
    qd, kvd = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d
    shapes = [(qd, e), (kvd, e), (kvd, e), (e, qd), (f, e), (f, e), (e, f)] * L + [(v, e)]
    total = 4 * e  # embedding row
    total += 4 * (2 * L + 1) * e  # norm gains
    for n, k in shapes:
        if quant == "fp32":
            total += 4 * n * k
        elif quant == "int8":
            total += n * k + 4 * n
        else:
            total += n * k // 2 + 2 * n * (k // group)
    return total


def find_runner(root, given):
    if given:
        return given if Path(given).exists() else None
    for cand in ("target/release/llama_runner", "target/release/llama-runner"):
        if (root / cand).exists():
            return str(root / cand)
    return None


def rbuild_export(rbuild, folder, quant, group, max_seq_len, out):
    cmd = [rbuild, "export", "--model", "llama", "--weights", str(folder), "--quant", quant,
           "--max-seq-len", str(max_seq_len), "--out", str(out)]
    if quant in ("int4", "8da4w"):
        cmd += ["--group-size", str(group)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {(r.stderr or r.stdout).strip()[-600:]}")
    return out


def stat(stats, *names):
    for n in names:
        if n in stats and stats[n] is not None:
            return float(stats[n])
    raise KeyError(f"runner JSON stats lack all of {names}; has {sorted(stats)}")


def rbuild_time(runner, pte, tokenizer, prompt, new_tokens, threads, repeat):
    cores = ",".join(str(i) for i in range(threads))
    cmd = ["taskset", "-c", cores, runner, "--model", str(pte), "--tokenizer", str(tokenizer), "--prompt", prompt,
           "--max-new-tokens", str(new_tokens), "--temperature", "0", "--seed", "0", "--ignore-eos",
           "--threads", str(threads), "--json"]  # --ignore-eos: llama.cpp's loop here does not stop either
    runs = []
    for i in range(repeat + 1):  # first run: warm-up (page cache)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:6])} … failed ({r.returncode}): {r.stderr.strip()[-600:]}")
        if i:
            out = r.stdout.strip()
            # one JSON object, pretty-printed or on the last line after other output
            runs.append(json.loads(out[out.index("{"):] if out.startswith("{") else out.splitlines()[-1]))
    st = [x.get("stats", x) for x in runs]
    return {
        "threads": threads,
        "prompt_tokens": int(stat(st[0], "prefill_tokens", "prompt_tokens")),
        "decode_tokens": int(stat(st[0], "decode_tokens", "generated_tokens")),
        "prefill_tok_s": statistics.median(stat(s, "prefill_tok_s", "prefill_tokens_per_s") for s in st),
        "decode_tok_s": statistics.median(stat(s, "decode_tok_s", "decode_tokens_per_s") for s in st),
        "generated": runs[0].get("generated_token_ids", runs[0].get("generated_tokens")),
    }


def rbuild_time_run(rbuild, pte, work, prompt, new_tokens, threads, repeat):
    """Without the runner: `rbuild run` times single forward calls of the program. Prefill = the
    whole prompt at position 0; decode = one token at the middle position of the generation
    (prompt + new/2), the cache attended up to there. The program's KV cache is its own state, so
    repeating a call rewrites the same cache rows: each repetition does a real step's work."""
    from safetensors.numpy import load_file, save_file

    cores = ",".join(str(i) for i in range(threads))

    def median_ms(tokens, pos, tag, reps):
        io = Path(work) / f"rbuild_{tag}.io.safetensors"
        out = Path(work) / f"rbuild_{tag}.out.safetensors"
        save_file({"input.0": np.asarray([tokens], dtype=np.int64), "input.1": np.asarray([pos], dtype=np.int64)}, str(io))
        cmd = ["taskset", "-c", cores, rbuild, "run", str(pte), "--inputs", str(io), "--threads", str(threads),
               "--repeat", str(reps), "--output", str(out)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[3:6])} failed ({r.returncode}): {(r.stderr or r.stdout).strip()[-600:]}")
        m = re.search(r"median ([0-9.]+) ms", r.stdout)
        if not m:
            raise RuntimeError(f"rbuild run printed no median: {r.stdout.strip()[-300:]}")
        return float(m.group(1)), load_file(str(out))["output.0"]

    # warm-up pass for the page cache (the first call of each process pays for it otherwise)
    median_ms(prompt, 0, "prefill", 1)
    pre_ms, logits = median_ms(prompt, 0, "prefill", repeat)
    dec_ms, _ = median_ms([prompt[-1]], len(prompt) + new_tokens // 2, "decode", 4 * repeat)
    last = np.asarray(logits, dtype=np.float32).reshape(-1, logits.shape[-1])[-1]
    return {
        "threads": threads, "prompt_tokens": len(prompt), "decode_tokens": 1,
        "prefill_tok_s": len(prompt) / (pre_ms / 1e3), "decode_tok_s": 1 / (dec_ms / 1e3),
        "generated": [int(np.argmax(last))], "via": "rbuild run", "last_logits": last,
    }


# ---------------------------------------------------------------- the whole run

def cpu_share(fn, threads):
    """Runs fn() (which runs child processes) and returns (its result, the children's CPU time /
    (wall time x threads)): near 1 when they had their cores to themselves, lower when other
    processes took them (load the 1-minute load average would only show late)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = fn()
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out, cpu / (wall * threads)


def sub(args, threads):
    """Runs this file's subcommand pinned to cores 0..threads-1 and returns its JSON."""
    cores = ",".join(str(i) for i in range(threads))
    r = subprocess.run(["taskset", "-c", cores, sys.executable, __file__, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:2])} on cores {cores} failed: {r.stderr.strip()[-800:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def run(a):
    root = HERE.parent.parent
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    threads = [int(t) for t in a.threads.split(",")]
    quants = a.quants.split(",")
    for q in quants:
        if q not in QUANTS:
            raise SystemExit(f"error: --quants: unknown {q!r} (known: {', '.join(QUANTS)})")
    if max(threads) > (os.cpu_count() or 1):
        raise SystemExit(f"error: --threads {a.threads}: this machine has {os.cpu_count()} CPUs")
    prompt_len, new_tokens, repeat = (32, 16, 2) if a.quick else (a.prompt_len, a.new_tokens, a.repeat)

    v = versions()
    print("Llama benchmark: rbuild vs llama.cpp, same run, same weights (random, seed "
          f"{a.seed}), {SHAPE_TEXT[a.shape]}")
    print(f"  llama-cpp-python {v['llama-cpp-python']} (llama.cpp built from source, GGML_NATIVE), gguf {v['gguf']}, numpy {v['numpy']}")
    print(f"  llama.cpp: {v['llama.cpp system']}")
    print(f"  CPU: {cpu_name()}; load average {os.getloadavg()[0]:.2f} (other processes skew timings)")
    print(f"  prompt {prompt_len} tokens (prefill), {new_tokens} new tokens greedy (decode rate over the "
          f"{new_tokens - 1} after the first), median of {repeat}{' (--quick)' if a.quick else ''}")

    t = time.perf_counter()
    name = a.shape.replace("-", "_")
    folder = gen(work / name, SHAPES[a.shape], a.seed)
    cfg, _ = load_hf(folder, lazy=True)
    need = sorted({QUANTS[q] for q in quants}, key=GGUF_TYPES.index)
    ggufs = {}
    for qt in need:
        path = work / f"{name}.{qt}.gguf"
        if not path.exists() or path.stat().st_mtime < weights_mtime(folder):
            write_gguf(folder, qt, path)
        ggufs[qt] = path
    print(f"  model files in {work} ({time.perf_counter() - t:.1f} s)")

    if not a.skip_check:
        if not check(work):
            raise SystemExit("error: llama.cpp does not compute the reference function on the check model; "
                             "the GGUF writer or the reference is wrong, figures would be meaningless")

    # Measured before and after the timed runs; the higher is kept (other processes only lower it).
    bw = {n: membw(work, n) for n in threads}

    prompt = prompt_ids(prompt_len, cfg["vocab_size"])
    rbuild = a.rbuild if a.rbuild and Path(a.rbuild).exists() else None
    runner = find_runner(root, a.runner)
    skip = None
    if rbuild is None:
        skip = f"rbuild binary not found ({a.rbuild})"
    elif "--quant" not in subprocess.run([rbuild, "export", "--help"], capture_output=True, text=True).stdout:
        skip = "this rbuild's `export` has no --quant option yet (KV-cache llama export not landed)"
    elif runner is None:
        print("  llama_runner not found (not built yet? or pass --runner PATH): rbuild rows are timed with "
              "`rbuild run` per forward call (prefill = one call on the prompt; decode = one 1-token call at "
              f"position {prompt_len + new_tokens // 2}), no sampling loop")
    ptes = {}
    if skip:
        print(f"  rbuild rows skipped: {skip}")
    else:
        for q in quants:
            pte = work / f"{name}.{q}.pte"
            try:
                rbuild_export(rbuild, folder, q, a.group_size, cfg["max_position_embeddings"], pte)
                ptes[q] = pte
                print(f"  rbuild export --quant {q}: {pte.stat().st_size / 1e6:.1f} MB")
            except RuntimeError as e:
                print(f"  rbuild {q} rows skipped: {e}")

    # Each llama.cpp row is followed at once by its rbuild rows, so a change in the machine's load
    # hits both sides of a ratio alike.
    text = prompt_text(prompt, cfg["vocab_size"])
    cpp, ours, shares = {}, {}, []
    for qt in need:
        for n in threads:
            cpp[qt, n], share = cpu_share(lambda: sub(["llamacpp", str(ggufs[qt]), "--threads", str(n), "--prompt-len", str(prompt_len),
                              "--new-tokens", str(new_tokens), "--repeat", str(repeat), "--vocab", str(cfg["vocab_size"]),
                              "--n-ctx", str(cfg["max_position_embeddings"])] + (["--flash-attn"] if a.flash_attn else []), n), n)
            shares.append(share)
            r = cpp[qt, n]
            print(f"  llama.cpp {qt:5s} {n}T: prefill {r['prefill_tok_s']:8.1f} tok/s, decode {r['decode_tok_s']:6.1f} tok/s "
                  f"(its perf counters: {r['perf_prefill_tok_s']:.1f} / {r['perf_decode_tok_s']:.1f}), CPU share {share:.2f}"
                  + ("" if r["deterministic"] else "  [WARNING: greedy tokens differ between repetitions]"))
            for q in (q for q in quants if QUANTS[q] == qt and q in ptes):
                try:
                    if runner:
                        o, share = cpu_share(lambda: rbuild_time(runner, ptes[q], folder / "tokenizer.json", text,
                                                                 new_tokens, n, repeat), n)
                    else:
                        o, share = cpu_share(lambda: rbuild_time_run(rbuild, ptes[q], work, prompt, new_tokens, n, repeat), n)
                    last = o.pop("last_logits", None)
                    ours[q, n] = o
                    shares.append(share)
                    if last is not None and n == threads[0]:
                        want = llamacpp_logits(ggufs[qt], prompt)[-1]
                        rel = float(np.sqrt(((last - want) ** 2).mean() / (want ** 2).mean()))
                        print(f"    prefill logits (last position) vs llama.cpp {qt}: max|diff| "
                              f"{np.abs(last - want).max():.1e}, rel RMS {rel:.1e}")
                except (RuntimeError, KeyError, ValueError) as e:  # ValueError: JSONDecodeError
                    print(f"  rbuild {q} {n}T skipped: {e}")
                    continue
                print(f"  rbuild    {q:5s} {n}T: prefill {o['prefill_tok_s']:8.1f} tok/s, decode {o['decode_tok_s']:6.1f} tok/s, "
                      f"CPU share {share:.2f}")
                if o.get("generated"):
                    # Same weights, same prompt: at fp32 the greedy tokens must be llama.cpp's f32 ones
                    # (quantized pairs round differently and may drift apart).
                    g, want = [int(x) for x in o["generated"]], r["generated"]
                    k = next((i for i, (x, y) in enumerate(zip(g, want)) if x != y), min(len(g), len(want)))
                    bad = q == "fp32" and k < min(len(g), len(want), 8)
                    print(f"    greedy tokens equal llama.cpp {qt}'s for the first {k} of {len(g)}"
                          + ("  [WARNING: fp32 should match f32: different functions?]" if bad else ""))
                if o["prompt_tokens"] != prompt_len:
                    print(f"  note: rbuild's prompt is {o['prompt_tokens']} tokens, llama.cpp's {prompt_len}")
    bw = {n: max(bw[n], membw(work, n)) for n in threads}
    print("  memory bandwidth (membw.c: streaming read of a 512 MiB f32 array, best of 10 passes, before and "
          "after the runs, cores pinned): " + ", ".join(f"{n} thread{'s' if n > 1 else ''} {bw[n]:.1f} GB/s" for n in threads))
    if min(shares) < 0.9:
        print(f"  WARNING: a run got only {min(shares):.0%} of its cores' time (CPU share above): other "
              "processes took cores, so those figures (2-thread ones most: a stalled thread stalls the other) are low and noisy")

    print()
    print("precision        thr | prefill tok/s            | decode tok/s             | weights MB/tok    | decode / BW bound")
    print("rbuild  llama.cpp     | rbuild llama.cpp  ratio  | rbuild llama.cpp  ratio  | rbuild llama.cpp  | rbuild llama.cpp")
    for q in quants:
        qt = QUANTS[q]
        cb = gguf_bytes_per_token(ggufs[qt])
        rb = rbuild_bytes_per_token(cfg, q, a.group_size, ptes.get(q))
        for n in threads:
            c = cpp[qt, n]
            o = ours.get((q, n))
            bound = bw[n] * 1e9

            def f(x, w=6, p=1):
                return f"{x:{w}.{p}f}" if x is not None else " " * (w - 1) + "-"

            op, od = (o["prefill_tok_s"], o["decode_tok_s"]) if o else (None, None)
            print(f"{q:6s}  {qt:9s} {n:2d}  | {f(op)} {f(c['prefill_tok_s'], 9)} {f(op and op / c['prefill_tok_s'], 6, 2)}  "
                  f"| {f(od)} {f(c['decode_tok_s'], 9)} {f(od and od / c['decode_tok_s'], 6, 2)}  "
                  f"| {rb / 1e6:6.1f} {cb / 1e6:8.1f}  | {f(od and od * rb / bound, 6, 2)} {f(c['decode_tok_s'] * cb / bound, 8, 2)}")
    print("ratio = rbuild / llama.cpp (target for issue 5: decode ratio >= 1 at each precision).")
    if any(o.get("via") for o in ours.values()):
        print("rbuild rows: single forward calls timed by `rbuild run` (no llama_runner), llama.cpp rows: its "
              "generation loop; decode compares one step at the middle position with the mean over the generation.")
    print("decode / BW bound = decode tok/s x weight bytes per token / measured bandwidth at that thread count "
          "(KV-cache reads not counted; above 1 means the bandwidth probe was disturbed).")
    if a.json:
        Path(a.json).write_text(json.dumps({
            "versions": v, "bandwidth_gb_s": bw,
            "llama_cpp": [dict(type=k[0], **val) for k, val in cpp.items()],
            "rbuild": [dict(quant=k[0], **val) for k, val in ours.items()],
            "gguf_bytes_per_token": {qt: gguf_bytes_per_token(p) for qt, p in ggufs.items()},
        }, indent=1))


def cpu_name():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip() + f", {os.cpu_count()} CPUs"
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sp = ap.add_subparsers(dest="cmd", required=True)
    g = sp.add_parser("gen")
    g.add_argument("out")
    g.add_argument("--tiny", action="store_true")
    g.add_argument("--shape", choices=sorted(SHAPES), default="stories110m")
    g.add_argument("--seed", type=int, default=0)
    g = sp.add_parser("gguf")
    g.add_argument("folder")
    g.add_argument("type", choices=GGUF_TYPES)
    g.add_argument("out")
    g = sp.add_parser("check")
    g.add_argument("work")
    g = sp.add_parser("llamacpp")
    g.add_argument("gguf")
    g.add_argument("--threads", type=int, default=1)
    g.add_argument("--prompt-len", type=int, default=128)
    g.add_argument("--new-tokens", type=int, default=64)
    g.add_argument("--repeat", type=int, default=5)
    g.add_argument("--vocab", type=int, default=32000)
    g.add_argument("--n-ctx", type=int, default=1024)
    g.add_argument("--flash-attn", action="store_true")
    g = sp.add_parser("membw")
    g.add_argument("work")
    g.add_argument("threads", type=int)
    g = sp.add_parser("run")
    g.add_argument("--rbuild", help="rbuild binary (export)")
    g.add_argument("--runner", help="llama_runner binary (default: target/release/llama_runner)")
    g.add_argument("--work", default=str(HERE.parent.parent / "target" / "llama_bench"))
    g.add_argument("--threads", default="1,2")
    g.add_argument("--quants", default="fp32,int8,int4,8da4w")
    g.add_argument("--shape", choices=sorted(SHAPES), default="stories110m",
                   help="model shape (voxtral-mini: Voxtral Mini 3B's text decoder, ~8 GB of f16 shards + GGUFs)")
    g.add_argument("--group-size", type=int, default=32)
    g.add_argument("--prompt-len", type=int, default=128)
    g.add_argument("--new-tokens", type=int, default=64)
    g.add_argument("--repeat", type=int, default=5)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--quick", action="store_true", help="32-token prompt, 16 new tokens, 2 repetitions")
    g.add_argument("--skip-check", action="store_true", help="skip the llama.cpp-vs-numpy correctness check")
    g.add_argument("--flash-attn", action="store_true", help="llama.cpp with flash attention (llama-cpp-python's default: off)")
    g.add_argument("--json", help="also write the figures to this file")
    a = ap.parse_args()
    if a.cmd == "gen":
        gen(a.out, TINY if a.tiny else SHAPES[a.shape], a.seed)
    elif a.cmd == "gguf":
        write_gguf(a.folder, a.type, a.out)
    elif a.cmd == "check":
        return 0 if check(a.work) else 1
    elif a.cmd == "llamacpp":
        print(json.dumps(llamacpp_time(a.gguf, a.threads, prompt_ids(a.prompt_len, a.vocab), a.new_tokens, a.repeat,
                                       a.n_ctx, a.flash_attn)))
    elif a.cmd == "membw":
        print(f"{membw(a.work, a.threads):.2f} GB/s")
    else:
        run(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
