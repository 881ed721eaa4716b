"""Whisper benchmark: rbuild vs whisper.cpp (pywhispercpp, built from source) in the same run.

Whisper tiny- and base-shaped models (d_model 384 / 512, 4 / 6 layers each side, 6 / 8 heads,
FFN 4 x d, vocab 51865, 80 mels, 1500 / 448 positions; `--sizes large-v3` adds Whisper large-v3's
encoder, Voxtral's audio encoder: 1280 x 32 layers, 20 heads, 128 mels, decoder trimmed to 2 layers) with the same seeded random weights
(whisper_random_checkpoint.py) in Hugging Face layout for rbuild and as ggml files for
whisper.cpp (whisper_ggml.py), on 30 s of speech (fox_16k.wav repeated with 0.5 s silences),
1 and 2 threads pinned with taskset; greedy on both sides: beam 1, best-of 1, temperature 0,
no fallback, no timestamps, language en, no previous-text prompt, the same number of sampled
tokens. Figures: encoder ms per 30 s window, decoder tokens/s, whole-file real-time factor.
whisper.cpp's come from its own whisper_print_timings (encode ms per run; decode ms per
single-token run); its real-time factor is whisper_full's wall time (mel + encode + decode) over
the audio length. whisper.cpp runs with its default flash attention (on in 1.8; --whisper-flash-attn
off for the exact path); rbuild's greedy tokens are compared with whisper.cpp's exact path
(flash attention off), which the check shows to give the numpy reference's tokens. Pairs: rbuild fp32
and fp16 (float16 weights, f32 arithmetic) vs whisper.cpp f16, rbuild int8 vs whisper.cpp q8_0.
rbuild's decode tok/s counts single-token decoder steps, as whisper.cpp's does (the prompt call,
which also projects the window's cross-attention keys/values, is reported apart as prompt ms).

Why f16 and not f32 for whisper.cpp: whisper.cpp 1.8.5 cannot run an f32 model on the CPU. An
f32 file makes the loader expect f32 conv kernels, and ggml_conv_1d always asks im2col for f16,
whose CPU kernel asserts an f16 kernel: GGML_ASSERT(src0->type == GGML_TYPE_F16) in
ggml_compute_forward_im2col_f16 (ggml-org/whisper.cpp issue #2557; the fix, ggml-org/llama.cpp
PR #25323, is still open). f16 weights (f32 activations rounded to f16 inside the matrix
products) are what whisper.cpp users run, and whisper.cpp's fastest unquantized format. rbuild's
fp32 moves twice the weight bytes, which is a handicap in the memory-bound decoder.

Subcommands (whisper.sh runs `run`):
  whispercpp GGML WAV [--threads N] [--max-new-tokens N] [--repeat N]   time whisper.cpp, print JSON
  run [options]                                                         everything, then the table
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
import whisper_ggml  # noqa: E402
import whisper_random_checkpoint  # noqa: E402

SIZES = ("tiny", "base", "large-v3")  # large-v3: the encoder of Whisper large-v3 and Voxtral, decoder trimmed
# rbuild precision -> (whisper.cpp ggml type, rbuild export --quant)
PAIRS = {"fp32": ("f16", "fp32"), "fp16": ("f16", "fp16"), "int8": ("q8_0", "int8")}
AUDIO_S = 30.0


# ---------------------------------------------------------------- whisper.cpp side

TIMING = re.compile(r"whisper_print_timings:\s+(\w+) time =\s*([\d.]+) ms(?: /\s*(\d+) runs \(\s*([\d.]+) ms per run\))?")
FALLBACKS = re.compile(r"fallbacks =\s*(\d+) p /\s*(\d+) h")


def read_wav(path):
    with wave.open(str(path)) as f:
        assert f.getframerate() == 16000 and f.getnchannels() == 1 and f.getsampwidth() == 2
        return np.frombuffer(f.readframes(f.getnframes()), dtype="<i2").astype(np.float32) / 32768.0


def write_wav(path, audio):
    pcm = np.clip(np.round(np.asarray(audio) * 32768.0), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(16000)
        f.writeframes(pcm.tobytes())


def whispercpp_time(ggml, wav, threads, max_new_tokens, repeat, flash_attn=True):
    """Runs in the pinned child: one warm-up whisper_full, reset timings, `repeat` timed runs, then
    whisper_print_timings (to stderr, parsed by the parent). stdout: one JSON line."""
    from pywhispercpp.model import Model
    import _pywhispercpp as pw

    audio = read_wav(wav)
    # whisper.cpp samples max_tokens + 1 tokens per window (it stops after sampling token i when
    # i >= max_tokens): max_tokens = N - 1 gives N sampled tokens, like --max-new-tokens N.
    m = Model(str(ggml), redirect_whispercpp_logs_to=False, n_threads=threads, print_progress=False,
              print_realtime=False, print_timestamps=False, print_special=False, no_timestamps=True,
              language="en", translate=False, temperature=0.0, temperature_inc=0.0, no_context=True,
              max_tokens=max_new_tokens - 1, suppress_blank=True, suppress_nst=False, greedy={"best_of": 1},
              beam_search={"beam_size": 1, "patience": -1.0}, context_params={"flash_attn": flash_attn})
    ctx, params = m._ctx, m._params

    def once():
        t = time.perf_counter()
        rc = pw.whisper_full(ctx, params, audio, audio.size)
        wall = time.perf_counter() - t
        if rc != 0:
            raise RuntimeError(f"whisper_full returned {rc}")
        eot = pw.whisper_token_eot(ctx)
        toks = [int(pw.whisper_full_get_token_id(ctx, s, j))
                for s in range(pw.whisper_full_n_segments(ctx)) for j in range(pw.whisper_full_n_tokens(ctx, s))]
        return wall, [t for t in toks if t < eot]

    once()  # warm-up: page cache, graph allocation
    pw.whisper_reset_timings(ctx)
    walls, tokens = [], None
    for _ in range(repeat):
        wall, toks = once()
        walls.append(wall)
        tokens = tokens or toks
    sys.stderr.flush()
    pw.whisper_print_timings(ctx)
    return {"threads": threads, "walls_s": walls, "tokens": tokens, "flash_attn": flash_attn,
            "flash_attn_default": bool(pw.whisper_context_default_params().flash_attn),
            "system_info": pw.whisper_print_system_info().strip()}


def parse_timings(stderr):
    """whisper_print_timings' lines -> {name: (total ms, runs, ms per run)} (the last block)."""
    out = {}
    for m in TIMING.finditer(stderr):
        out[m[1]] = (float(m[2]), int(m[3]) if m[3] else None, float(m[4]) if m[4] else None)
    fb = FALLBACKS.findall(stderr)
    out["fallbacks"] = tuple(int(x) for x in fb[-1]) if fb else None
    return out


def pinned(cmd, threads):
    """Runs cmd pinned to cores 0..threads-1; returns (CompletedProcess, CPU share): the children's
    CPU time / (wall x threads), near 1 when nobody else took the cores."""
    import resource

    cores = ",".join(str(i) for i in range(threads))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(["taskset", "-c", cores, *map(str, cmd)], capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return r, cpu / (wall * threads)


def whispercpp_cell(ggml, wav, threads, max_new_tokens, repeat, flash_attn=True):
    r, share = pinned([sys.executable, __file__, "whispercpp", ggml, wav, "--threads", threads,
                       "--max-new-tokens", max_new_tokens, "--repeat", repeat,
                       "--flash-attn", "on" if flash_attn else "off"], threads)
    if r.returncode != 0:
        raise RuntimeError(f"whisper.cpp on {ggml} ({threads}T) failed: {r.stderr.strip()[-800:]}")
    j = json.loads(r.stdout.strip().splitlines()[-1])
    t = parse_timings(r.stderr)
    enc, dec, sample = t["encode"], t["decode"], t["sample"]
    assert enc[1] == repeat, f"whisper.cpp ran the encoder {enc[1]} times in {repeat} runs (expected one window each)"
    return {
        "threads": threads,
        "encoder_ms": enc[2],
        "decode_ms_per_token": dec[2],
        "decode_tok_s": 1e3 / dec[2],
        "decode_runs": dec[1] // repeat,
        "sample_ms": sample[0] / repeat,  # per window (whisper.cpp counts sampling runs per window)
        "prompt_ms": (t["batchd"][0] + t["prompt"][0]) / repeat,
        "mel_ms": t["mel"][0] / repeat,
        "rtf": statistics.median(j["walls_s"]) / AUDIO_S,
        "fallbacks": t["fallbacks"],
        "tokens": j["tokens"],
        "flash_attn": j["flash_attn"],
        "flash_attn_default": j["flash_attn_default"],
        "system_info": j["system_info"],
        "cpu_share": share,
    }


# ---------------------------------------------------------------- rbuild side (adapt here)
#
# Everything rbuild-specific is in this section. The runner's JSON (templates/asr, work in
# progress when this was written): {"text", "segments", "tokens": [...], "stats": {"audio_s",
# "transcribe_ms", "real_time_factor", "windows", "encoder_ms_per_window", "decoder_tokens",
# "decode_tok_s", ...}}. `stat` accepts the alternative spellings listed, so a rename only needs
# a new name there.

RUNNER_NAMES = ("whisper_runner", "whisper-runner", "asr_runner", "asr-runner")


def find_runner(given):
    if given:
        return given if Path(given).exists() else None
    for n in RUNNER_NAMES:
        if (ROOT / "target" / "release" / n).exists():
            return str(ROOT / "target" / "release" / n)
    return None


def rbuild_export(rbuild, folder, quant, out):
    """`rbuild export --model whisper --weights HF_DIR --out model.pte [--quant int8]`; raises with
    the tool's message when it fails (e.g. before rbuild knows --model whisper)."""
    cmd = [rbuild, "export", "--model", "whisper", "--weights", str(folder), "--out", str(out)]
    if quant != "fp32":
        cmd += ["--quant", quant]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 or not Path(out).exists():
        raise RuntimeError(f"{' '.join(map(str, cmd[1:4]))} failed ({r.returncode}): {(r.stderr or r.stdout).strip()[-400:]}")
    return out


def stat(stats, *names):
    for n in names:
        if n in stats and stats[n] is not None:
            return float(stats[n])
    raise KeyError(f"runner JSON stats lack all of {names}; has {sorted(stats)}")


def rbuild_cell(runner, pte, wav, tokenizer, threads, max_new_tokens, repeat):
    cmd = [runner, "--model", pte, "--audio", wav, "--threads", threads, "--language", "en",
           "--temperature", "0", "--no-fallback", "--no-context", "--max-new-tokens", max_new_tokens, "--json"]
    if tokenizer:
        cmd += ["--tokenizer", tokenizer]
    runs, shares = [], []
    for i in range(repeat + 1):  # the first run is a warm-up (page cache)
        r, share = pinned(cmd, threads)
        if r.returncode != 0:
            raise RuntimeError(f"{Path(runner).name} ({threads}T) failed ({r.returncode}): {r.stderr.strip()[-600:]}")
        if i:
            out = r.stdout.strip()
            runs.append(json.loads(out[out.index("{"):] if out.startswith("{") else out.splitlines()[-1]))
            shares.append(share)
    st = [x.get("stats", x) for x in runs]
    return {
        "threads": threads,
        "encoder_ms": statistics.median(stat(s, "encoder_ms_per_window", "encoder_ms", "encode_ms") for s in st),
        "decode_tok_s": statistics.median(stat(s, "decode_tok_s", "decode_tokens_per_s") for s in st),
        "rtf": statistics.median(stat(s, "real_time_factor", "rtf") for s in st),
        "audio_s": stat(st[0], "audio_s", "audio_seconds"),
        "decoder_tokens": int(stat(st[0], "decoder_tokens", "decode_tokens", "generated_tokens")),
        "tokens": runs[0].get("tokens", runs[0].get("token_ids")),
        "cpu_share": min(shares),
    }


# ---------------------------------------------------------------- the whole run

def cpu_name():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip() + f", {os.cpu_count()} CPUs"
    except OSError:
        pass
    return "unknown CPU"


def versions():
    import importlib.metadata as md

    v = {}
    for p in ("pywhispercpp", "numpy", "safetensors"):
        try:
            v[p] = md.version(p)
        except md.PackageNotFoundError:
            v[p] = "missing"
    return v


def checkpoint(work, size, seed):
    """The HF folder, regenerated only when missing or written with another seed/generator."""
    folder = work / size
    stamp = folder / ".bench_stamp"
    want = f"seed {seed}, generator {(HERE / 'whisper_random_checkpoint.py').stat().st_mtime_ns}"
    if not (stamp.exists() and stamp.read_text() == want and (folder / "model.safetensors").exists()):
        whisper_random_checkpoint.write(folder, size, seed)
        stamp.write_text(want)
    return folder


def ggml_file(folder, qtype):
    out = folder.parent / f"{folder.name}.{qtype}.bin"
    src = folder / "model.safetensors"
    if not out.exists() or out.stat().st_mtime_ns < src.stat().st_mtime_ns:
        whisper_ggml.convert(folder, out, qtype)
    return out


def fmt(x, w=7, p=1):
    return f"{x:{w}.{p}f}" if isinstance(x, (int, float)) and x == x else f"{'-':>{w}s}"


def run(a):
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    threads = [int(t) for t in a.threads.split(",")]
    sizes = a.sizes.split(",")
    precs = a.quants.split(",")
    for s in sizes:
        if s not in SIZES:
            raise SystemExit(f"error: --sizes: unknown {s!r} (known: {', '.join(SIZES)})")
    for q in precs:
        if q not in PAIRS:
            raise SystemExit(f"error: --quants: unknown {q!r} (known: {', '.join(PAIRS)})")
    if max(threads) > (os.cpu_count() or 1):
        raise SystemExit(f"error: --threads {a.threads}: this machine has {os.cpu_count()} CPUs")
    repeat = 1 if a.quick else a.repeat
    n_new = a.max_new_tokens

    v = versions()
    print(f"Whisper benchmark: rbuild vs whisper.cpp, same run, same weights (random, seed {a.seed}), "
          f"sizes {', '.join(sizes)}, {AUDIO_S:.0f} s of speech")
    print(f"  pywhispercpp {v['pywhispercpp']} (whisper.cpp built from source, GGML_NATIVE), numpy {v['numpy']}")
    print(f"  CPU: {cpu_name()}; load average {os.getloadavg()[0]:.2f} (other processes skew timings)")
    print(f"  greedy: beam 1, best-of 1, temperature 0, no fallback, no timestamps, language en, "
          f"{n_new} sampled tokens; median of {repeat} run(s) after a warm-up{' (--quick)' if a.quick else ''}")

    tmp = Path(tempfile.mkdtemp(prefix="whisper_bench_"))
    try:
        wav = tmp / "speech_30s.wav"
        write_wav(wav, whisper_ggml.speech(AUDIO_S))
        t = time.perf_counter()
        folders = {s: checkpoint(work, s, a.seed) for s in sizes}
        ggmls = {(s, q): ggml_file(folders[s], PAIRS[q][0]) for s in sizes for q in precs}
        print(f"  checkpoints and ggml files in {work} ({time.perf_counter() - t:.1f} s); audio {wav}")

        if not a.skip_check:
            check_cmd = [sys.executable, str(HERE / "whisper_ggml.py"), "check"]
            for q in precs:
                s0 = sizes[0]
                steps = 8 if a.quick else 24
                r = subprocess.run([*check_cmd, folders[s0], ggmls[(s0, q)], "--steps", str(steps)],
                                   capture_output=True, text=True)
                if not r.stdout.strip():
                    raise SystemExit(f"check failed to run: {r.stderr.strip()[-800:]}")
                c = json.loads(r.stdout.strip().splitlines()[-1])
                exact = PAIRS[q][0] != "q8_0"  # f16 rounds activations too, but only to 11 bits
                need = min(steps, 8)
                ok = c["negative_control_differs"] and (c["equal_prefix"] >= need or not exact)
                print(f"  check {s0} {PAIRS[q][0]:4s}: whisper.cpp (flash attention off) greedy tokens equal the numpy "
                      f"reference's for {c['equal_prefix']} of {steps} (same log-mel), token log-prob max|diff| "
                      f"{c['logprob_max_abs_diff']:.1e}; flash attention on: {c['flash_attn_equal_prefix']} of {steps}; "
                      f"on silence numpy's tokens "
                      f"{'differ' if c['negative_control_differs'] else 'DO NOT differ'}  {'ok' if ok else 'FAIL'}"
                      + (f" (at least {need} required)" if exact else " (q8_0 also quantizes activations to 8 bits: "
                                                                       "reported, not required)"))
                if not ok:
                    raise SystemExit("error: whisper.cpp does not compute the numpy reference's function; "
                                     "fix the ggml writer before timing")

        # Reference tokens for rbuild's rows: whisper.cpp's exact path (flash attention off), which
        # the check above shows to give the numpy reference's greedy tokens.
        ref_tokens = {}
        if not a.whisper_cpp_only:
            for s in sizes:
                for q in precs:
                    c = whispercpp_cell(ggmls[(s, q)], wav, 2 if 2 in threads else threads[0], n_new, 1, flash_attn=False)
                    ref_tokens[(s, q)] = c["tokens"]
        fa = a.whisper_flash_attn == "on"
        rows = {}
        shares = []
        for s in sizes:
            for q in precs:
                for n in threads:
                    c = whispercpp_cell(ggmls[(s, q)], wav, n, n_new, repeat, flash_attn=fa)
                    rows[(s, q, n)] = {"whisper.cpp": c}
                    shares.append(c["cpu_share"])
                    print(f"  whisper.cpp {s} {PAIRS[q][0]:4s} {n}T: encoder {c['encoder_ms']:7.1f} ms/window, decode "
                          f"{c['decode_ms_per_token']:5.2f} ms/token ({c['decode_tok_s']:6.1f} tok/s), sampling {c['sample_ms']:.0f} ms, {c['decode_runs']} decode runs + prompt {c['prompt_ms']:.1f} ms, mel {c['mel_ms']:.0f} ms, "
                          f"RTF {c['rtf']:.3f}, fallbacks {c['fallbacks']}, CPU share {c['cpu_share']:.0%}")
        first = next(iter(rows.values()))["whisper.cpp"]
        print(f"  whisper.cpp: flash attention {'on' if first['flash_attn'] else 'off'} in the timed runs (its default: "
              f"{'on' if first['flash_attn_default'] else 'off'}); {first['system_info']}")

        # ---- rbuild side (skipped with a notice until `rbuild export --model whisper` works)
        skip = None
        runner = find_runner(a.runner)
        if a.whisper_cpp_only:
            skip = "--whisper-cpp-only"
        elif not a.rbuild or not Path(a.rbuild).exists():
            skip = f"rbuild binary not found ({a.rbuild})"
        elif not runner:
            skip = "whisper_runner not built (templates/asr; or pass --runner PATH)"
        if skip:
            print(f"  rbuild rows skipped: {skip}")
        else:
            tok = ROOT / ".venv" / "share" / "whisper-assets" / "multilingual.tiktoken"
            for s in sizes:
                for q in precs:
                    pte = work / f"{s}.{q}.pte"
                    try:
                        rbuild_export(a.rbuild, folders[s], PAIRS[q][1], pte)
                    except RuntimeError as e:
                        print(f"  rbuild {s} {q} rows skipped: {e}")
                        continue
                    print(f"  rbuild export {s} --quant {PAIRS[q][1]}: {pte.stat().st_size / 1e6:.1f} MB")
                    for n in threads:
                        try:
                            o = rbuild_cell(runner, pte, wav, tok if tok.exists() else None, n, n_new, repeat)
                        except (RuntimeError, KeyError, ValueError) as e:
                            print(f"  rbuild {s} {q} {n}T skipped: {e}")
                            continue
                        rows[(s, q, n)]["rbuild"] = o
                        shares.append(o["cpu_share"])
                        cpp = ref_tokens.get((s, q)) or []
                        ours = o["tokens"] or []
                        k = whisper_ggml.prefix(cpp, ours)
                        print(f"  rbuild    {s} {q:4s} {n}T: encoder {o['encoder_ms']:7.1f} ms/window, decode "
                              f"{o['decode_tok_s']:6.1f} tok/s ({o['decoder_tokens']} tokens), RTF {o['rtf']:.3f}, "
                              f"CPU share {o['cpu_share']:.0%}; greedy tokens equal whisper.cpp's ({PAIRS[q][0]}, flash "
                              f"attention off) for the first {k} of {len(ours)}")
        if shares and min(shares) < 0.8:
            print(f"  WARNING: a run got only {min(shares):.0%} of its cores' time (CPU share above): other "
                  "processes took CPU time, so some figures are low")

        print()
        print("every ratio: > 1 means rbuild is faster (encoder and RTF: whisper.cpp / rbuild, lower is better; "
              "decode: rbuild / whisper.cpp)")
        print("size precision           thr | encoder ms per window      | decode tok/s               | real-time factor")
        print("     rbuild whisper.cpp      | rbuild whisper.cpp  ratio  | rbuild whisper.cpp  ratio  | rbuild whisper.cpp  ratio")
        for (s, q, n), r in rows.items():
            c, o = r["whisper.cpp"], r.get("rbuild", {})
            oe, od, orf = o.get("encoder_ms"), o.get("decode_tok_s"), o.get("rtf")
            print(f"{s:4s} {q:6s} {PAIRS[q][0]:11s} {n:3d} | {fmt(oe)} {fmt(c['encoder_ms'], 10)} "
                  f"{fmt(oe and c['encoder_ms'] / oe, 6, 2)}  | {fmt(od)} {fmt(c['decode_tok_s'], 10)} "
                  f"{fmt(od and od / c['decode_tok_s'], 6, 2)}  | {fmt(orf, 7, 3)} {fmt(c['rtf'], 10, 3)} "
                  f"{fmt(orf and c['rtf'] / orf, 6, 2)}")
        print("whisper.cpp: encoder = whisper_print_timings' encode ms per run (one 30 s window), decode tok/s = 1000 / its "
              "decode ms per single-token run (sampling not included), RTF = whisper_full wall time / 30 s.")
        if a.json:
            Path(a.json).write_text(json.dumps(
                {f"{s}/{q}/{n}": r for (s, q, n), r in rows.items()}, indent=1, default=str))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sp = ap.add_subparsers(dest="cmd", required=True)
    g = sp.add_parser("whispercpp")
    g.add_argument("ggml")
    g.add_argument("wav")
    g.add_argument("--threads", type=int, default=1)
    g.add_argument("--max-new-tokens", type=int, default=64)
    g.add_argument("--repeat", type=int, default=3)
    g.add_argument("--flash-attn", choices=("on", "off"), default="on")
    g = sp.add_parser("run")
    g.add_argument("--rbuild", help="rbuild binary (export)", default=str(ROOT / "target" / "release" / "rbuild"))
    g.add_argument("--runner", help="whisper_runner binary (default: target/release/whisper_runner)")
    g.add_argument("--work", default=str(ROOT / "target" / "whisper_bench"))
    g.add_argument("--sizes", default="tiny,base")
    g.add_argument("--threads", default="1,2")
    g.add_argument("--quants", default="fp32,fp16,int8")
    g.add_argument("--max-new-tokens", type=int, default=64)
    g.add_argument("--repeat", type=int, default=3)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--quick", action="store_true", help="1 timed run per cell, 8-step check")
    g.add_argument("--skip-check", action="store_true", help="skip the whisper.cpp-vs-numpy check")
    g.add_argument("--whisper-cpp-only", action="store_true", help="time whisper.cpp only")
    g.add_argument("--whisper-flash-attn", choices=("on", "off"), default="on",
                   help="whisper.cpp's flash attention in the timed runs (on: whisper.cpp 1.8's default)")
    g.add_argument("--json", help="also write the figures to this file")
    a = ap.parse_args()
    if a.cmd == "whispercpp":
        print(json.dumps(whispercpp_time(a.ggml, a.wav, a.threads, a.max_new_tokens, a.repeat, a.flash_attn == "on")))
        return 0
    run(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
