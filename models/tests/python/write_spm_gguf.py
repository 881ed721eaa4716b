"""Writes a small GGUF whose tokenizer is a SentencePiece (`llama`) vocabulary with scores, the
kind Llama 2, Mistral 7B and TinyLlama GGUF files carry: specials, the 256 byte tokens, and
pieces of a fixed English sample (words with the ▁ prefix, their prefixes, single characters),
scored so longer pieces merge last. Deterministic: the same file on every run.

usage: write_spm_gguf.py OUT.gguf
"""
import sys

import numpy as np
import gguf

SAMPLE = ("the quick brown fox jumps over the lazy dog while the other dogs sleep "
          "in the warm sun and nobody thinks about tokenizers at all today")


def vocabulary():
    tokens, scores, types = ["<unk>", "<s>", "</s>"], [0.0, 0.0, 0.0], [2, 3, 3]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        scores.append(0.0)
        types.append(6)
    pieces = []
    for ch in sorted(set(SAMPLE.replace(" ", "")) | {"\u2581"}):
        pieces.append(ch)
    for word in sorted(set(SAMPLE.split())):
        w = "\u2581" + word
        for end in range(2, len(w) + 1):
            pieces.append(w[:end])
        for start in range(1, len(word) - 1):
            pieces.append(word[start:start + 2])
    seen = set()
    for i, p in enumerate(pieces):
        if p in seen:
            continue
        seen.add(p)
        tokens.append(p)
        # Shorter pieces score higher (merged earlier), as SentencePiece BPE vocabularies do.
        scores.append(-float(len(p)) - i * 1e-3)
        types.append(1)
    return tokens, scores, types


def main():
    tokens, scores, types = vocabulary()
    w = gguf.GGUFWriter(sys.argv[1], "llama")
    w.add_block_count(1)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_space_prefix(True)
    w.add_tensor("token_embd.weight", np.zeros((len(tokens), 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
