"""Writes a Hugging Face `WhisperForConditionalGeneration` folder with seeded random weights.

    python tool/bench/whisper_random_checkpoint.py OUT_DIR [--size tiny|base] [--seed 0]

Shapes are Whisper tiny's / base's (multilingual: vocab 51865, 80 mels, 1500 audio positions,
448 text positions); names and config keys are exactly HF's (checked against
/work/shared/testdata/models/whisper_tiny): config.json, generation_config.json (the real
multilingual ids) and model.safetensors (float32, output projection tied to
model.decoder.embed_tokens.weight, so no proj_out tensor).

The weights are "well conditioned": projections N(0, 1/fan_in) so activations keep unit scale
through the layers (queries and keys x2, so attention is not uniform), layer-norm gains near 1
(not exactly 1, so a skipped gain shows), small biases, sinusoidal encoder positions as in
Whisper, token embeddings N(0, 0.25^2) and text positions N(0, 2^2), so that greedy decoding
yields varied tokens that depend on the audio (checked: fox_16k and silence decode differently)
rather than one token repeated. The rows of embed_tokens for the special
tokens (ids >= 50257: eot, sot, languages, tasks, timestamps) are scaled by 0.1: their logits
(tied projection) stay far below the best regular token's, so greedy decoding never ends early
on <|endoftext|> and never picks a special token, whatever suppression rules an engine applies.
Every engine then decodes exactly --max-new-tokens tokens (the same ones where the arithmetic
agrees), which is what a benchmark at equal work needs. Uses numpy and safetensors only.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

SIZES = {
    "tiny": dict(d_model=384, layers=4, heads=6),
    "base": dict(d_model=512, layers=6, heads=8),
    # Whisper large-v3's encoder (1280 x 32 layers, 20 heads, 128 mels), as in Voxtral's audio
    # encoder; the decoder trimmed to 2 layers (only the encoder is compared at this size) and the
    # 99-language vocabulary of the other sizes kept (the encoder does not read it).
    "large-v3": dict(d_model=1280, layers=32, heads=20, mels=128, decoder_layers=2),
}
VOCAB = 51865
N_MELS = 80
MAX_SOURCE = 1500
MAX_TARGET = 448
EOT, SOT = 50257, 50258
FIRST_LANG = 50259
TRANSLATE, TRANSCRIBE = 50358, 50359
SOT_LM, SOT_PREV, NO_SPEECH, NO_TIMESTAMPS = 50360, 50361, 50362, 50363
# openai/whisper tokenizer.LANGUAGES order (the 99 of the non-v3 multilingual models).
LANGUAGES = (
    "en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no th ur hr bg "
    "lt la mi ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq sw gl mr pa si km sn yo so "
    "af oc ka be tg sd gu am yi lo uz fo ht ps tk nn mt sa lb my bo tl mg as tt haw ln ha ba jw su"
).split()
assert len(LANGUAGES) == 99 and FIRST_LANG + len(LANGUAGES) == TRANSLATE


def config(size):
    s = SIZES[size]
    d, n, h = s["d_model"], s["layers"], s["heads"]
    n_dec = s.get("decoder_layers", n)
    return {
        "activation_dropout": 0.0,
        "activation_function": "gelu",
        "apply_spec_augment": False,
        "architectures": ["WhisperForConditionalGeneration"],
        "attention_dropout": 0.0,
        "begin_suppress_tokens": [220, EOT],
        "bos_token_id": EOT,
        "classifier_proj_size": 256,
        "d_model": d,
        "decoder_attention_heads": h,
        "decoder_ffn_dim": 4 * d,
        "decoder_layerdrop": 0.0,
        "decoder_layers": n_dec,
        "decoder_start_token_id": SOT,
        "dropout": 0.0,
        "dtype": "float32",
        "encoder_attention_heads": h,
        "encoder_ffn_dim": 4 * d,
        "encoder_layerdrop": 0.0,
        "encoder_layers": n,
        "eos_token_id": EOT,
        "init_std": 0.02,
        "is_encoder_decoder": True,
        "mask_feature_length": 10,
        "mask_feature_min_masks": 0,
        "mask_feature_prob": 0.0,
        "mask_time_length": 10,
        "mask_time_min_masks": 2,
        "mask_time_prob": 0.05,
        "max_source_positions": MAX_SOURCE,
        "max_target_positions": MAX_TARGET,
        "median_filter_width": 7,
        "model_type": "whisper",
        "num_hidden_layers": n,
        "num_mel_bins": s.get("mels", N_MELS),
        "pad_token_id": EOT,
        "scale_embedding": False,
        "suppress_tokens": [],
        "tie_word_embeddings": True,
        "transformers_version": "5.24.0",
        "use_cache": True,
        "use_weighted_layer_sum": False,
        "vocab_size": VOCAB,
    }


def generation_config():
    # suppress_tokens is empty: whisper.cpp applies no non-speech list unless asked
    # (suppress_nst), so with [] every engine filters the same tokens.
    return {
        "begin_suppress_tokens": [220, EOT],
        "bos_token_id": EOT,
        "decoder_start_token_id": SOT,
        "eos_token_id": EOT,
        "is_multilingual": True,
        "lang_to_id": {f"<|{lang}|>": FIRST_LANG + i for i, lang in enumerate(LANGUAGES)},
        "max_initial_timestamp_index": 50,
        "max_length": MAX_TARGET,
        "no_timestamps_token_id": NO_TIMESTAMPS,
        "pad_token_id": EOT,
        "prev_sot_token_id": SOT_PREV,
        "return_timestamps": False,
        "suppress_tokens": [],
        "task_to_id": {"translate": TRANSLATE, "transcribe": TRANSCRIBE},
        "transformers_version": "5.24.0",
        "use_cache": True,
    }


def sinusoids(length, channels, max_timescale=10000.0):
    """Whisper's encoder positions (openai/whisper model.py `sinusoids`): [sin | cos]."""
    inc = np.log(max_timescale) / (channels // 2 - 1)
    inv = np.exp(-inc * np.arange(channels // 2, dtype=np.float64))
    t = np.arange(length, dtype=np.float64)[:, None] * inv[None, :]
    return np.concatenate([np.sin(t), np.cos(t)], axis=1).astype(np.float32)


def random_weights(size, seed=0):
    cfg = config(size)
    d, n = cfg["d_model"], cfg["encoder_layers"]
    f = cfg["encoder_ffn_dim"]
    rng = np.random.default_rng(seed)

    def normal(*shape, scale=1.0):
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)).astype(np.float32)

    def proj(out_f, in_f, gain=1.0):
        return normal(out_f, in_f, scale=gain / np.sqrt(in_f))

    def bias(k):
        return normal(k, scale=0.02)

    def ln(w, prefix):
        w[prefix + ".weight"] = (1.0 + normal(d, scale=0.1)).astype(np.float32)
        w[prefix + ".bias"] = bias(d)

    def attn(w, prefix):
        for p in ("q", "k", "v", "out"):
            # gain 2 on queries and keys: attention scores with std ~4 rather than ~1, so the
            # decoder attends to particular frames and tokens instead of averaging them all
            w[f"{prefix}.{p}_proj.weight"] = proj(d, d, gain=2.0 if p in ("q", "k") else 1.0)
            if p != "k":  # Whisper's key projections have no bias
                w[f"{prefix}.{p}_proj.bias"] = bias(d)

    def mlp(w, prefix):
        w[prefix + ".fc1.weight"] = proj(f, d)
        w[prefix + ".fc1.bias"] = bias(f)
        w[prefix + ".fc2.weight"] = proj(d, f)
        w[prefix + ".fc2.bias"] = bias(d)

    w = {}
    # GELU halves the variance: gain 2 on the convolutions keeps the audio features near unit scale
    # next to the unit-scale sinusoids.
    mels = cfg["num_mel_bins"]
    w["model.encoder.conv1.weight"] = normal(d, mels, 3, scale=2.0 / np.sqrt(3 * mels))
    w["model.encoder.conv1.bias"] = bias(d)
    w["model.encoder.conv2.weight"] = normal(d, d, 3, scale=2.0 / np.sqrt(3 * d))
    w["model.encoder.conv2.bias"] = bias(d)
    w["model.encoder.embed_positions.weight"] = sinusoids(MAX_SOURCE, d)
    for i in range(n):
        p = f"model.encoder.layers.{i}"
        attn(w, p + ".self_attn")
        ln(w, p + ".self_attn_layer_norm")
        mlp(w, p)
        ln(w, p + ".final_layer_norm")
    ln(w, "model.encoder.layer_norm")

    # Token embeddings small next to the positions and the layers' outputs: with the tied output
    # projection a large embedding is copied to the logits and greedy decoding repeats one token
    # forever; at 0.25 (and positions at 2) the tokens vary and depend on the audio.
    emb = normal(VOCAB, d, scale=0.25)
    emb[EOT:] *= np.float32(0.1)  # specials never win greedy argmax (see the module docstring)
    w["model.decoder.embed_tokens.weight"] = emb
    w["model.decoder.embed_positions.weight"] = normal(MAX_TARGET, d, scale=2.0)
    for i in range(cfg["decoder_layers"]):
        p = f"model.decoder.layers.{i}"
        attn(w, p + ".self_attn")
        ln(w, p + ".self_attn_layer_norm")
        attn(w, p + ".encoder_attn")
        ln(w, p + ".encoder_attn_layer_norm")
        mlp(w, p)
        ln(w, p + ".final_layer_norm")
    ln(w, "model.decoder.layer_norm")
    return cfg, w


def write(out, size="tiny", seed=0):
    from safetensors.numpy import save_file

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg, w = random_weights(size, seed)
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    (out / "generation_config.json").write_text(json.dumps(generation_config(), indent=2) + "\n")
    save_file(w, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--size", choices=sorted(SIZES), default="tiny")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    out = write(a.out, a.size, a.seed)
    print(f"wrote {out} (whisper {a.size} shape, seed {a.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
