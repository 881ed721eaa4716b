"""Greedy token ids of Hugging Face transformers on a GGUF file (dequantized to float32 by
transformers' own GGUF loader), for the prompts given: the reference rbuild's GGUF import is
compared with (`tool/cli/tests/suite/gguf.rs`).

usage: gguf_hf_greedy.py MODEL.gguf OUT.json [--new-tokens N]
Needs torch, transformers and gguf (not in the CI venv: run where they are installed; the
output is committed as the test's expected values).
"""
import json
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

# (kind, text): "raw" prompts are encoded as the tokenizer does by default; "chat" ones go
# through the file's chat template as one user message with the generation prompt.
PROMPTS = [
    ("raw", "The capital of France is"),
    ("raw", "def fibonacci(n):"),
    ("chat", "What is the capital of France?"),
    ("chat", "Write a haiku about the sea."),
]

# Texts whose encodings are compared too: digits, unicode, whitespace runs, specials.
TEXTS = [
    "Hello world",
    "  leading spaces and   multiple",
    "Numbers 1234567 and 3.14159",
    "na\u00efve caf\u00e9 \u2014 \u201cquotes\u201d \u65e5\u672c\u8a9e \U0001F600",
    "<|im_start|>user\nhi<|im_end|>\n",
    "tabs\tand\nnewlines\n\n\nend",
    "don't I'll we've",
    "def f(a,b):\n    return a**b # comment",
]


def main():
    path, out = sys.argv[1], sys.argv[2]
    new_tokens = int(sys.argv[sys.argv.index("--new-tokens") + 1]) if "--new-tokens" in sys.argv else 32
    folder, name = path.rsplit("/", 1)
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, torch_dtype=torch.float32)
    model.eval()
    cases = []
    for kind, text in PROMPTS:
        if kind == "chat":
            rendered = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False)
            ids = tok(rendered, add_special_tokens=False)["input_ids"]
        else:
            ids = tok(text)["input_ids"]
        with torch.no_grad():
            # An explicit mask: generate() otherwise masks every prompt token equal to the pad id
            # (SmolLM2's pad is its <|im_end|>, which chat prompts contain).
            x = torch.tensor([ids])
            gen = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=new_tokens, do_sample=False, eos_token_id=None)
        generated = gen[0, len(ids):].tolist()
        cases.append({"kind": kind, "prompt": text, "prompt_ids": ids, "generated_ids": generated,
                      "text": tok.decode(generated)})
    encodings = [{"text": t, "ids": tok(t)["input_ids"]} for t in TEXTS]
    json.dump({"model": name, "encodings": encodings, "transformers": __import__("transformers").__version__, "torch": torch.__version__,
               "new_tokens": new_tokens, "cases": cases}, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
