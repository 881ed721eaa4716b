"""Decode and prefill tokens/s of real GGUF model files: rbuild (`rbuild llama-cpu
weights=FILE`, the file's Q4_0/Q4_1/Q8_0 blocks kept, its own selective runner) against
llama.cpp (llama-cpp-python) on the very same files, in the same run, 1 and 2 threads pinned
with taskset; greedy, the same prompt text (each side's own tokenizer: the file's). Called by
`tool/bench/llama.sh --gguf FILE[,FILE…]`.

usage: gguf_bench.py --rbuild RBUILD --gguf F1[,F2…] [--threads 1,2] [--new-tokens 64] [--repeat 5]
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import llama_bench as lb  # noqa: E402

# ~130 tokens of plain English: the prefill measured.
PROMPT = (
    "The history of the printing press begins in the fifteenth century, when Johannes Gutenberg "
    "combined movable metal type, oil-based ink and a wooden screw press into a system that could "
    "produce books faster and more cheaply than ever before. Within fifty years presses were working "
    "in more than two hundred European cities, and millions of volumes had been printed. Scholars "
    "argue about how much the new technology changed the way people read, wrote and thought, but "
    "few doubt that it transformed the spread of knowledge. Write a short summary of this passage."
)


def build(rbuild, gguf, work):
    out = work / Path(gguf).stem
    env = dict(os.environ, RBUILD_OUT=str(out))
    r = subprocess.run([rbuild, "llama-cpu", f"weights={gguf}"], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"rbuild llama-cpu weights={gguf} failed:\n{r.stderr[-2000:]}")
    kept = next((l for l in r.stderr.splitlines() if "kept the file's quantization" in l), "")
    return out / "llama-cpu" / "host", kept.strip()


def llamacpp(gguf, threads, new_tokens, repeat):
    import llama_cpp

    tok = llama_cpp.Llama(model_path=str(gguf), vocab_only=True, verbose=False)
    prompt = tok.tokenize(PROMPT.encode(), add_bos=False, special=False)
    return lb.llamacpp_time(gguf, threads, prompt, new_tokens, repeat, 512)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rbuild", required=True)
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--work", default=str(HERE.parent.parent / "target" / "gguf_bench"))
    ap.add_argument("--llamacpp-only", nargs=3, metavar=("GGUF", "THREADS", "REPEAT"), help=argparse.SUPPRESS)
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.llamacpp_only:
        g, n, rep = a.llamacpp_only
        print(json.dumps(llamacpp(g, int(n), a.new_tokens, int(rep))))
        return 0
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    print(f"CPU: {lb.cpu_name()}; prompt {len(PROMPT)} characters, {a.new_tokens} new tokens, median of {a.repeat}")
    print(f"{'file':<28} {'thr':>3} {'rbuild pre':>11} {'llama.cpp':>10} {'ratio':>6} {'rbuild dec':>11} {'llama.cpp':>10} {'ratio':>6}")
    for gguf in a.gguf.split(","):
        host, kept = build(a.rbuild, gguf, work)
        print(f"# {Path(gguf).name}: {kept or 'no blocks kept'}")
        for n in [int(t) for t in a.threads.split(",")]:
            rb, rb_share = lb.cpu_share(lambda: lb.rbuild_time(str(host / "llama_runner"), host / "model.pte", host / "tokenizer.json",
                                                            PROMPT, a.new_tokens, n, a.repeat), n)
            cores = ",".join(str(i) for i in range(n))
            cmd = ["taskset", "-c", cores, sys.executable, __file__, "--rbuild", a.rbuild, "--gguf", gguf,
                   "--new-tokens", str(a.new_tokens), "--llamacpp-only", gguf, str(n), str(a.repeat)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"llama.cpp timing failed: {r.stderr[-1500:]}")
            cpp = json.loads(r.stdout.strip().splitlines()[-1])
            row = dict(file=Path(gguf).name, threads=n, rbuild=rb, llamacpp=cpp, rbuild_cpu_share=rb_share)
            rows.append(row)
            print(f"{Path(gguf).name:<28} {n:>3} {rb['prefill_tok_s']:>11.1f} {cpp['prefill_tok_s']:>10.1f} "
                  f"{rb['prefill_tok_s'] / cpp['prefill_tok_s']:>6.2f} {rb['decode_tok_s']:>11.1f} {cpp['decode_tok_s']:>10.1f} "
                  f"{rb['decode_tok_s'] / cpp['decode_tok_s']:>6.2f}   (prompt tokens: rbuild {rb['prompt_tokens']}, llama.cpp {cpp['prompt_tokens']})")
    if a.json:
        Path(a.json).write_text(json.dumps(dict(versions=lb.versions(), rows=rows), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
