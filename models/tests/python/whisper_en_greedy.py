"""Hugging Face's greedy ids for a random English-only Whisper checkpoint (openai-whisper's
`*.en` vocabulary: 51864 ids, <|endoftext|> 50256, <|startoftranscript|> 50257, no language
or task tokens in the prompt, <|notimestamps|> 50362), the reference of
`tool/cli/tests/suite/whisper_en`. The weights come from a counter-based generator the Rust
test reimplements bit for bit (`whisper_en::weights`): tensor t (sorted name order), element i
-> splitmix64(SEED ^ (t << 40) ^ i) >> 40 as a 24-bit fraction u, value (2u - 1) * 0.2
(layer-norm weights 1 + (2u - 1) * 0.1), all in float32; names and shapes are the shared
`whisper_tiny` checkpoint's with the token table grown to 51864 rows.

usage: whisper_en_greedy.py TESTDATA OUT.json [--seed N]
Needs torch, transformers, safetensors (not in the CI venv; the output is committed).
"""
import json
import sys

import numpy as np
import torch
from safetensors.numpy import load_file
from transformers import WhisperConfig, WhisperForConditionalGeneration

VOCAB = 51864
EOT, SOT, SOT_PREV, NO_SPEECH, NO_TIMESTAMPS = 50256, 50257, 50360, 50361, 50362
M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def splitmix(x):
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def weights(testdata, seed):
    shapes = {k: v.shape for k, v in load_file(f"{testdata}/models/whisper_tiny/model.safetensors").items()}
    shapes["model.decoder.embed_tokens.weight"] = (VOCAB, shapes["model.decoder.embed_tokens.weight"][1])
    out = {}
    for t, name in enumerate(sorted(shapes)):
        n = int(np.prod(shapes[name]))
        i = np.arange(n, dtype=np.uint64)
        u = (splitmix(np.uint64(seed) ^ (np.uint64(t) << np.uint64(40)) ^ i) >> np.uint64(40)).astype(np.float32) / np.float32(16777216.0)
        v = u * np.float32(2.0) - np.float32(1.0)
        if "layer_norm.weight" in name:
            v = np.float32(1.0) + v * np.float32(0.1)
        else:
            v = v * np.float32(0.2)
        out[name] = v.reshape(shapes[name])
    return out


def config(testdata):
    c = json.load(open(f"{testdata}/models/whisper_tiny/config.json"))
    c.update(vocab_size=VOCAB, bos_token_id=EOT, eos_token_id=EOT, pad_token_id=EOT, decoder_start_token_id=SOT)
    return c


def main():
    testdata, out = sys.argv[1], sys.argv[2]
    seed = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else 7
    model = WhisperForConditionalGeneration(WhisperConfig(**config(testdata)))
    state = {k: torch.from_numpy(v) for k, v in weights(testdata, seed).items()}
    state["proj_out.weight"] = state["model.decoder.embed_tokens.weight"]
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and all(k == "proj_out.weight" for k in missing), (missing, unexpected)
    model.eval()
    feats = load_file(f"{testdata}/models/audio/fox_16k.features.safetensors")["mel80.first300"]
    feats = torch.from_numpy(feats).reshape(1, 80, -1)
    # A manual argmax loop over the no-cache decoder: what the runner does with no filters but
    # its bans (sot, sot_prev, nospeech, timestamps without --timestamps), checked not to fire.
    ids = [SOT, NO_TIMESTAMPS]
    gaps = []
    with torch.no_grad():
        enc = model.model.encoder(feats).last_hidden_state
        for _ in range(16):
            h = model.model.decoder(input_ids=torch.tensor([ids]), encoder_hidden_states=enc).last_hidden_state
            logits = model.proj_out(h)[0, -1]
            top = torch.topk(logits, 2)
            t = int(top.indices[0])
            gaps.append(float(top.values[0] - top.values[1]))
            assert t not in (SOT, SOT_PREV, NO_SPEECH) and t <= NO_TIMESTAMPS, f"seed {seed}: step picks banned token {t}"
            ids.append(t)
            if t == EOT:
                break
    json.dump({"seed": seed, "prompt": ids[:2], "generated": ids[2:], "min_top1_top2_gap": min(gaps),
               "source": "transformers WhisperForConditionalGeneration, manual argmax over the no-cache decoder, fox_16k mel80.first300"},
              open(out, "w"), indent=1)
    print(ids[2:], min(gaps))


if __name__ == "__main__":
    main()
