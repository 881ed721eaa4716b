"""Hugging Face Whisper checkpoint -> whisper.cpp ggml model file, a numpy reference of the HF
model, and a check that whisper.cpp (pywhispercpp) computes the same function.

    python tool/bench/whisper_ggml.py convert HF_DIR OUT.bin [--ftype f32|f16|q8_0] [--assets DIR]
    python tool/bench/whisper_ggml.py check HF_DIR GGML.bin [--steps 24] [--threads 1]

File layout (whisper.cpp `whisper_model_load`): int32 magic 0x67676d6c; 11 int32 hparams (n_vocab,
n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_text_ctx, n_text_state, n_text_head,
n_text_layer, n_mels, ftype); mel filters (int32 n_mel, int32 201, f32 [n_mel, 201], Slaney, from
the openai-whisper sdist's mel_filters.npz); vocab (int32 50257, then per token int32 length and
its bytes, from multilingual.tiktoken; the loader synthesises the specials); then each tensor:
int32 n_dims, int32 name length, int32 type (0 f32, 1 f16, 8 q8_0), dims innermost first, name,
data. Tensor names are openai's. Types follow what the loader expects for a file's ftype:
f32 file -> everything f32 (it loads, but whisper.cpp 1.8.5 then aborts at the first
convolution: ggml_conv_1d's im2col is f16-only, whisper.cpp issue #2557); f16 file -> 2-D weights and conv kernels f16; q8_0 file (ftype
7 + 1000 x GGML_QNT_VERSION 2) -> 2-D weights q8_0 (blocks of 32: f16 scale amax/127, 32 int8
rounded half away from zero, as ggml's quantize_row_q8_0_ref), conv kernels f16 (the loader's
"vtype"); biases, layer norms and positional embeddings always f32.

The check (see `check`): the numpy forward of the HF weights (dequantised from the ggml file, so
an f16/q8_0 file is compared with the function it stores) against whisper.cpp (flash attention
off; with it on, whisper.cpp 1.8's default, the agreement is reported) on the same log-mel (set with whisper_set_mel; whisper_full with 0 samples then uses it): greedy token ids,
and each token's log-probability (whisper_full_get_token_data().plog) against numpy's
log-softmax, then the same numpy decode on silence as a negative control (the tokens must
differ: the check sees the audio path). pywhispercpp returns whisper_get_logits() as a single
float (a float* binding), so whole logit rows are not compared.
"""

import argparse
import base64
import json
import math
import struct
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DEFAULT_ASSETS = ROOT / ".venv" / "share" / "whisper-assets"
MAGIC = 0x67676D6C
GGML_QNT_VERSION, GGML_QNT_VERSION_FACTOR = 2, 1000
FTYPES = {"f32": 0, "f16": 1, "q8_0": 7}  # ggml_ftype: ALL_F32, MOSTLY_F16, MOSTLY_Q8_0
T_F32, T_F16, T_Q8_0 = 0, 1, 8  # ggml_type
QK8_0 = 32
SAMPLE_RATE, N_FFT, HOP, CHUNK = 16000, 400, 160, 30


# ---------------------------------------------------------------- HF checkpoint

def load_hf(folder):
    from safetensors.numpy import load_file

    folder = Path(folder)
    cfg = json.loads((folder / "config.json").read_text())
    gen = json.loads((folder / "generation_config.json").read_text()) if (folder / "generation_config.json").exists() else {}
    w = {k: v.astype(np.float32) for k, v in load_file(str(folder / "model.safetensors")).items()}
    return cfg, gen, w


def openai_name(hf):
    """HF tensor name -> openai / whisper.cpp name (None for tensors the file does not carry)."""
    n = hf[len("model."):] if hf.startswith("model.") else hf
    if n in ("proj_out.weight",):
        return None  # tied to decoder.embed_tokens
    rep = [
        ("encoder.embed_positions.weight", "encoder.positional_embedding"),
        ("decoder.embed_positions.weight", "decoder.positional_embedding"),
        ("decoder.embed_tokens.weight", "decoder.token_embedding.weight"),
        ("encoder.layer_norm.", "encoder.ln_post."),
        ("decoder.layer_norm.", "decoder.ln."),
        (".layers.", ".blocks."),
        (".self_attn_layer_norm.", ".attn_ln."),
        (".encoder_attn_layer_norm.", ".cross_attn_ln."),
        (".final_layer_norm.", ".mlp_ln."),
        (".self_attn.", ".attn."),
        (".encoder_attn.", ".cross_attn."),
        (".q_proj.", ".query."),
        (".k_proj.", ".key."),
        (".v_proj.", ".value."),
        (".out_proj.", ".out."),
        (".fc1.", ".mlp.0."),
        (".fc2.", ".mlp.2."),
    ]
    for a, b in rep:
        n = n.replace(a, b)
    return n


# ---------------------------------------------------------------- assets

def mel_filters(assets, n_mels):
    with np.load(Path(assets) / "mel_filters.npz") as f:
        return f[f"mel_{n_mels}"].astype(np.float32)  # [n_mels, 201]


def tiktoken_vocab(assets, name="multilingual.tiktoken"):
    toks = []
    for line in (Path(assets) / name).read_text().splitlines():
        if line:
            tok, rank = line.split()
            assert int(rank) == len(toks), "tiktoken ranks are consecutive"
            toks.append(base64.b64decode(tok))
    return toks


# ---------------------------------------------------------------- ggml writer

def f16_bytes(x):
    return np.ascontiguousarray(x, dtype=np.float16).tobytes()


def q8_0_blocks(x):
    """ggml block_q8_0 rows: per 32 values an f16 scale d = amax/127 and 32 int8 round(x/d)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    assert x.shape[-1] % QK8_0 == 0, "q8_0 needs rows that are a multiple of 32"
    b = x.reshape(-1, QK8_0)
    amax = np.abs(b).max(axis=1)
    d = amax / 127.0
    inv = np.divide(1.0, d, out=np.zeros_like(d), where=d != 0)
    v = b * inv[:, None]
    q = (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int8)  # roundf: half away from zero
    out = np.empty(len(b), dtype=[("d", "<f2"), ("qs", "i1", (QK8_0,))])
    out["d"] = d.astype(np.float16)
    out["qs"] = q
    return out.tobytes()


def dequant_q8_0(raw, shape):
    blk = np.frombuffer(raw, dtype=[("d", "<f2"), ("qs", "i1", (QK8_0,))])
    return (blk["qs"].astype(np.float32) * blk["d"].astype(np.float32)[:, None]).reshape(shape)


def tensor_type(name, arr, ftype):
    if ftype == "f32" or arr.ndim == 1 or "positional_embedding" in name or name.endswith(".bias"):
        return T_F32
    if name.startswith("encoder.conv"):
        return T_F16  # whisper.cpp's conv kernels: f32 in f32 files, else f16
    return T_Q8_0 if ftype == "q8_0" else T_F16


def convert(folder, out, ftype="f16", assets=DEFAULT_ASSETS):
    cfg, _, w = load_hf(folder)
    n_mels, n_vocab = cfg["num_mel_bins"], cfg["vocab_size"]
    fid = FTYPES[ftype] + (GGML_QNT_VERSION * GGML_QNT_VERSION_FACTOR if ftype == "q8_0" else 0)
    filters = mel_filters(assets, n_mels)
    vocab = tiktoken_vocab(assets, "multilingual.tiktoken" if n_vocab >= 51865 else "gpt2.tiktoken")
    hp = [n_vocab, cfg["max_source_positions"], cfg["d_model"], cfg["encoder_attention_heads"], cfg["encoder_layers"],
          cfg["max_target_positions"], cfg["d_model"], cfg["decoder_attention_heads"], cfg["decoder_layers"], n_mels, fid]
    out = Path(out)
    tmp = out.with_name(out.name + ".part")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<i", MAGIC))
        f.write(struct.pack("<11i", *hp))
        f.write(struct.pack("<2i", *filters.shape))
        f.write(filters.astype("<f4").tobytes())
        f.write(struct.pack("<i", len(vocab)))
        for t in vocab:
            f.write(struct.pack("<i", len(t)))
            f.write(t)
        for hf, arr in w.items():
            name = openai_name(hf)
            if name is None:
                continue
            if name.startswith("encoder.conv") and name.endswith(".bias"):
                arr = arr.reshape(-1, 1)  # whisper.cpp: conv biases are [n_state, 1]
            t = tensor_type(name, arr, ftype)
            nb = name.encode()
            f.write(struct.pack("<3i", arr.ndim, len(nb), t))
            f.write(struct.pack(f"<{arr.ndim}i", *reversed(arr.shape)))  # innermost first
            f.write(nb)
            f.write(arr.astype("<f4").tobytes() if t == T_F32 else f16_bytes(arr) if t == T_F16 else q8_0_blocks(arr))
    tmp.replace(out)
    return out


def read_ggml(path):
    """Reads a ggml Whisper file back: hparams, filters, vocab size and the (dequantised, f32)
    tensors by openai name, in numpy (C-order, outermost first) shapes."""
    b = Path(path).read_bytes()
    o = 0

    def take(fmt):
        nonlocal o
        v = struct.unpack_from(fmt, b, o)
        o += struct.calcsize(fmt)
        return v

    assert take("<i")[0] == MAGIC, "bad magic"
    hp = dict(zip("n_vocab n_audio_ctx n_audio_state n_audio_head n_audio_layer n_text_ctx n_text_state "
                  "n_text_head n_text_layer n_mels ftype".split(), take("<11i")))
    nm, nf = take("<2i")
    filters = np.frombuffer(b, "<f4", nm * nf, o).reshape(nm, nf)
    o += 4 * nm * nf
    (nv,) = take("<i")
    for _ in range(nv):
        (ln,) = take("<i")
        o += ln
    tensors, types = {}, {}
    while o < len(b):
        nd, ln, t = take("<3i")
        shape = tuple(reversed(take(f"<{nd}i")))
        name = b[o:o + ln].decode()
        o += ln
        n = int(np.prod(shape))
        if t == T_F32:
            a = np.frombuffer(b, "<f4", n, o).reshape(shape)
            o += 4 * n
        elif t == T_F16:
            a = np.frombuffer(b, "<f2", n, o).astype(np.float32).reshape(shape)
            o += 2 * n
        elif t == T_Q8_0:
            nbytes = n // QK8_0 * (2 + QK8_0)
            a = dequant_q8_0(b[o:o + nbytes], shape)
            o += nbytes
        else:
            raise ValueError(f"{name}: ggml type {t} not handled")
        tensors[name], types[name] = a, t
    return hp, filters, nv, tensors, types


# ---------------------------------------------------------------- numpy reference (openai names)

def log_mel(audio, filters, n_frames=3000):
    """Whisper's log-mel of `audio` (16 kHz float): the file plus 30 s of zeros, STFT (n_fft 400,
    hop 160, periodic Hann, centred, reflect pad, last frame dropped), power, Slaney mel filters,
    log10 clamped at 1e-10, max-8 clamp over the whole file, (x+4)/4; first n_frames frames."""
    x = np.concatenate([np.asarray(audio, np.float64), np.zeros(SAMPLE_RATE * CHUNK)])
    x = np.pad(x, (N_FFT // 2, N_FFT // 2), mode="reflect")
    n = 1 + (len(x) - N_FFT) // HOP
    frames = np.lib.stride_tricks.as_strided(x, (n, N_FFT), (x.strides[0] * HOP, x.strides[0]))[:-1]
    win = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)
    power = np.abs(np.fft.rfft(frames * win, axis=1)) ** 2  # [T, 201]
    mel = filters.astype(np.float64) @ power.T  # [n_mels, T]
    lg = np.log10(np.maximum(mel, 1e-10))
    lg = np.maximum(lg, lg.max() - 8.0)
    return ((lg + 4.0) / 4.0)[:, :n_frames].astype(np.float32)


def _erf(x):
    # Abramowitz & Stegun 7.1.26 is 1.5e-7 accurate: far below the engines' own differences.
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * np.exp(-a * a)
    return s * y


def gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def layer_norm(x, g, b, eps=1e-5):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * g + b


def conv1d(x, w, b, stride):
    """x [C_in, T], w [C_out, C_in, 3], padding 1."""
    xp = np.pad(x, ((0, 0), (1, 1)))
    t_out = (x.shape[1] + 2 - 3) // stride + 1
    cols = np.stack([xp[:, k: k + stride * (t_out - 1) + 1: stride] for k in range(3)], axis=-1)  # [C_in, T, 3]
    return np.einsum("ctk,ock->ot", cols, w, optimize=True) + b.reshape(-1, 1)


def attention(x, kv, p, n_head, causal=False):
    q = x @ p["query.weight"].T + p["query.bias"]
    k = kv @ p["key.weight"].T
    v = kv @ p["value.weight"].T + p["value.bias"]
    tq, d = q.shape
    hd = d // n_head
    q = q.reshape(tq, n_head, hd).transpose(1, 0, 2)
    k = k.reshape(-1, n_head, hd).transpose(1, 0, 2)
    v = v.reshape(-1, n_head, hd).transpose(1, 0, 2)
    s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
    if causal:
        tk = k.shape[1]
        s = s + np.triu(np.full((tq, tk), -np.inf), k=tk - tq + 1)
    s = np.exp(s - s.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    o = (s @ v).transpose(1, 0, 2).reshape(tq, d)
    return o @ p["out.weight"].T + p["out.bias"]


def sub(w, prefix):
    return {k[len(prefix):]: v for k, v in w.items() if k.startswith(prefix)}


def np_encoder(w, hp, mel):
    w = {k: v.astype(np.float64) for k, v in w.items() if k.startswith("encoder.")}
    x = gelu(conv1d(mel.astype(np.float64), w["encoder.conv1.weight"], w["encoder.conv1.bias"], 1))
    x = gelu(conv1d(x, w["encoder.conv2.weight"], w["encoder.conv2.bias"], 2)).T  # [T/2, d]
    x = x + w["encoder.positional_embedding"][: x.shape[0]]
    for i in range(hp["n_audio_layer"]):
        p = sub(w, f"encoder.blocks.{i}.")
        h = layer_norm(x, p["attn_ln.weight"], p["attn_ln.bias"])
        x = x + attention(h, h, sub(p, "attn."), hp["n_audio_head"])
        h = layer_norm(x, p["mlp_ln.weight"], p["mlp_ln.bias"])
        x = x + gelu(h @ p["mlp.0.weight"].T + p["mlp.0.bias"]) @ p["mlp.2.weight"].T + p["mlp.2.bias"]
    return layer_norm(x, w["encoder.ln_post.weight"], w["encoder.ln_post.bias"])


def np_decoder_logits(w, hp, enc, tokens):
    """Logits [len(tokens), n_vocab] of the no-cache decoder on `tokens` (positions 0..)."""
    w = {k: v.astype(np.float64) for k, v in w.items() if k.startswith("decoder.")}
    emb = w["decoder.token_embedding.weight"]
    x = emb[tokens] + w["decoder.positional_embedding"][: len(tokens)]
    for i in range(hp["n_text_layer"]):
        p = sub(w, f"decoder.blocks.{i}.")
        h = layer_norm(x, p["attn_ln.weight"], p["attn_ln.bias"])
        x = x + attention(h, h, sub(p, "attn."), hp["n_text_head"], causal=True)
        h = layer_norm(x, p["cross_attn_ln.weight"], p["cross_attn_ln.bias"])
        x = x + attention(h, enc, sub(p, "cross_attn."), hp["n_text_head"])
        h = layer_norm(x, p["mlp_ln.weight"], p["mlp_ln.bias"])
        x = x + gelu(h @ p["mlp.0.weight"].T + p["mlp.0.bias"]) @ p["mlp.2.weight"].T + p["mlp.2.bias"]
    x = layer_norm(x, w["decoder.ln.weight"], w["decoder.ln.bias"])
    return x @ emb.T


def np_greedy(w, hp, enc, prompt, steps, suppress, begin_suppress):
    """Greedy tokens and their log-probabilities after suppression (openai / whisper.cpp rules as
    given: `suppress` always, `begin_suppress` at the first sampled step)."""
    toks, lps = list(prompt), []
    for i in range(steps):
        lg = np_decoder_logits(w, hp, enc, toks)[-1].copy()
        lg[list(suppress)] = -np.inf
        if i == 0:
            lg[list(begin_suppress)] = -np.inf
        lp = lg - lg.max()
        lp = lp - np.log(np.exp(lp).sum())
        t = int(np.argmax(lg))
        toks.append(t)
        lps.append(float(lp[t]))
    return toks[len(prompt):], lps


# ---------------------------------------------------------------- the check

def speech(seconds=None):
    """fox_16k.wav (the shared test clip), optionally repeated with 0.5 s silences to `seconds`."""
    import wave

    src = Path("/work/shared/testdata/models/audio/fox_16k.wav")
    with wave.open(str(src)) as f:
        assert f.getframerate() == SAMPLE_RATE and f.getnchannels() == 1 and f.getsampwidth() == 2
        pcm = np.frombuffer(f.readframes(f.getnframes()), dtype="<i2").astype(np.float32) / 32768.0
    if seconds is None:
        return pcm
    gap = np.zeros(SAMPLE_RATE // 2, dtype=np.float32)
    n = int(seconds * SAMPLE_RATE)
    out = []
    while sum(len(x) for x in out) < n:
        out += [pcm, gap]
    return np.concatenate(out)[:n]


def whisper_cpp_special_suppression(hp, gen):
    """The ids whisper.cpp's whisper_process_logits always masks with no_timestamps (sot,
    nospeech, solm, translate, transcribe, prev, notimestamps, languages, timestamps)."""
    sot = gen.get("decoder_start_token_id", 50258)
    return list(range(sot, hp["n_vocab"]))


def whisper_cpp_greedy(ggml, mel, steps, threads=1, flash_attn=False, quiet=True):
    """whisper.cpp's greedy tokens (and their log-probabilities) for a log-mel set with
    whisper_set_mel: whisper_full with 0 samples keeps the state's mel."""
    from pywhispercpp.model import Model
    import _pywhispercpp as pw

    m = Model(str(ggml), redirect_whispercpp_logs_to=None if quiet else False, n_threads=threads,
              print_progress=False, print_realtime=False, print_timestamps=False, no_timestamps=True,
              language="en", translate=False, single_segment=True, max_tokens=steps - 1, temperature=0.0,
              temperature_inc=0.0, no_context=True, suppress_blank=True, greedy={"best_of": 1},
              beam_search={"beam_size": 1, "patience": -1.0}, context_params={"flash_attn": flash_attn})
    ctx = m._ctx
    assert pw.whisper_set_mel(ctx, np.ascontiguousarray(mel), mel.shape[1], mel.shape[0]) == 0
    assert pw.whisper_full(ctx, m._params, np.zeros(0, dtype=np.float32), 0) == 0
    toks, lps = [], []
    eot = pw.whisper_token_eot(ctx)
    for s in range(pw.whisper_full_n_segments(ctx)):
        for j in range(pw.whisper_full_n_tokens(ctx, s)):
            d = pw.whisper_full_get_token_data(ctx, s, j)
            if d.id < eot:  # text tokens only
                toks.append(int(d.id))
                lps.append(float(d.plog))
    return toks, lps


def prefix(a, b):
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return k


def check(folder, ggml, steps=24, threads=1, quiet=True):
    """whisper.cpp with flash attention off (its exact path: f32 softmax and accumulation) must
    give the numpy reference's greedy tokens; with flash attention on (whisper.cpp 1.8's default:
    f16 queries, keys and values, f16 accumulation on the CPU) the agreement is reported."""
    cfg, gen, _ = load_hf(folder)
    hp, filters, _, w, types = read_ggml(ggml)
    eot = gen.get("eos_token_id", 50257)
    lang = gen["lang_to_id"]["<|en|>"]
    prompt = [gen["decoder_start_token_id"], lang, gen["task_to_id"]["transcribe"], gen["no_timestamps_token_id"]]
    mel = log_mel(speech(), filters, 2 * hp["n_audio_ctx"])
    res = {"ggml": str(ggml), "steps": steps}
    cpp_toks, cpp_lps = whisper_cpp_greedy(ggml, mel, steps, threads, flash_attn=False, quiet=quiet)
    fa_toks, _ = whisper_cpp_greedy(ggml, mel, steps, threads, flash_attn=True, quiet=quiet)
    t0 = time.perf_counter()
    enc = np_encoder(w, hp, mel)
    sup = whisper_cpp_special_suppression(hp, gen)
    np_toks, np_lps = np_greedy(w, hp, enc, prompt, steps, sup, gen.get("begin_suppress_tokens", [220, eot]))
    silent = np_encoder(w, hp, log_mel(np.zeros(SAMPLE_RATE), filters, 2 * hp["n_audio_ctx"]))
    neg_toks, _ = np_greedy(w, hp, silent, prompt, min(steps, 8), sup, gen.get("begin_suppress_tokens", [220, eot]))
    res["numpy_s"] = time.perf_counter() - t0
    k = prefix(cpp_toks, np_toks)
    res.update(whisper_cpp_tokens=cpp_toks, numpy_tokens=np_toks, equal_prefix=k,
               flash_attn_tokens=fa_toks, flash_attn_equal_prefix=prefix(fa_toks, np_toks),
               logprob_max_abs_diff=max((abs(a - b) for a, b in zip(cpp_lps[:k], np_lps[:k])), default=float("nan")),
               negative_control_differs=neg_toks[:8] != np_toks[:8])
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sp = ap.add_subparsers(dest="cmd", required=True)
    g = sp.add_parser("convert")
    g.add_argument("folder")
    g.add_argument("out")
    g.add_argument("--ftype", choices=sorted(FTYPES), default="f16")
    g.add_argument("--assets", default=str(DEFAULT_ASSETS))
    g = sp.add_parser("check")
    g.add_argument("folder")
    g.add_argument("ggml")
    g.add_argument("--steps", type=int, default=24)
    g.add_argument("--threads", type=int, default=1)
    g.add_argument("--verbose", action="store_true", help="show whisper.cpp's log")
    a = ap.parse_args()
    if a.cmd == "convert":
        out = convert(a.folder, a.out, a.ftype, a.assets)
        print(f"wrote {out} ({a.ftype}, {out.stat().st_size / 1e6:.1f} MB)")
        return 0
    r = check(a.folder, a.ggml, a.steps, a.threads, quiet=not a.verbose)
    print(json.dumps(r))
    # f32 files do not run in whisper.cpp 1.8.5 (see whisper_bench.py); f16 ones round activations
    # to f16 in the products, so only the first steps are required to agree.
    ok = r["equal_prefix"] >= min(a.steps, 8) and r["negative_control_differs"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
