"""Perplexity of a Hugging Face transformers model on a text, computed as llama.cpp's
`llama-perplexity` does (and `rbuild eval --text`): the text's tokens (a BOS first when the
tokenizer adds one) in chunks of CTX, each chunk from an empty context, the second half of
each chunk scored (positions CTX/2 … CTX-2 predicting the next token). The reference for
rbuild's perplexity (issue: `rbuild eval` equals Hugging Face's within 0.5 %).

usage: hf_perplexity.py (MODEL.gguf | HF_FOLDER) TEXT [--ctx N] [--bytes N]
Needs torch, transformers and gguf (not in the CI venv).
"""
import json
import math
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    path, text_path = sys.argv[1], sys.argv[2]
    ctx = int(sys.argv[sys.argv.index("--ctx") + 1]) if "--ctx" in sys.argv else 256
    limit = int(sys.argv[sys.argv.index("--bytes") + 1]) if "--bytes" in sys.argv else None
    kwargs = {}
    if path.endswith(".gguf"):
        path, kwargs["gguf_file"] = path.rsplit("/", 1)
    tok = AutoTokenizer.from_pretrained(path, **kwargs)
    model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32, **kwargs)
    model.eval()
    data = open(text_path, "rb").read()
    text = (data[:limit] if limit else data).decode("utf-8", errors="ignore")
    ids = tok(text, add_special_tokens=False)["input_ids"]
    with_bos = tok("a")["input_ids"][:1] == [tok.bos_token_id] and tok.bos_token_id is not None
    if with_bos:
        ids = [tok.bos_token_id] + ids
    chunks = len(ids) // ctx
    nll, count = 0.0, 0
    with torch.no_grad():
        for c in range(chunks):
            chunk = ids[c * ctx:(c + 1) * ctx]
            if with_bos:
                chunk = [tok.bos_token_id] + chunk[1:]
            logits = model(torch.tensor([chunk])).logits[0].double()
            logp = torch.log_softmax(logits, dim=-1)
            for j in range(ctx // 2, ctx - 1):
                nll -= logp[j, chunk[j + 1]].item()
                count += 1
    print(json.dumps({"metric": "perplexity", "value": math.exp(nll / count), "tokens": len(ids), "chunks": chunks, "ctx": ctx, "scored_tokens": count}))


if __name__ == "__main__":
    main()
