"""Tokenize strings with mistral-common's Tekkenizer, as an oracle for rbuild's Tekken tokenizer.

Usage: tekken_oracle.py STRINGS.json TEKKEN.json OUT.json [SPECIAL_NAME ...]
STRINGS is a JSON list of strings. OUT gets {"vocab_size", "num_special_tokens", "bos_id",
"special_ids": {name: id}, "cases": [{"text", "ids", "ids_bos", "decoded"}]} where `ids` is
`encode(text, bos=False, eos=False)`, `ids_bos` is `encode(text, bos=True, eos=False)` and
`decoded` is `decode(ids)` (the default policy: special tokens ignored).
"""

import json
import logging
import sys

from mistral_common.tokens.tokenizers.tekken import Tekkenizer


def main():
    strings_path, tekken_path, out_path, *special_names = sys.argv[1:]
    logging.disable(logging.INFO)  # "Cutting non special vocabulary ..." on every load
    tok = Tekkenizer.from_file(tekken_path)
    strings = json.load(open(strings_path, encoding="utf-8"))
    cases = []
    for text in strings:
        ids = tok.encode(text, bos=False, eos=False)
        cases.append(
            {"text": text, "ids": ids, "ids_bos": tok.encode(text, bos=True, eos=False), "decoded": tok.decode(ids)}
        )
    out = {
        "vocab_size": tok.n_words,
        "num_special_tokens": tok.num_special_tokens,
        "bos_id": tok.bos_id,
        "special_ids": {name: tok.get_special_token(name) for name in special_names},
        "cases": cases,
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
    print(f"{len(cases)} strings tokenized with {tekken_path}")


if __name__ == "__main__":
    main()
