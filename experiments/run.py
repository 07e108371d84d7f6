"""Train one small decoder per positional encoding and measure it past its training length.

    python experiments/run.py            the full run -> experiments/results.{json,md}
    python experiments/run.py --quick    a tiny version (under a minute): checks the harness
    python experiments/run.py --quick --out DIR   write the results somewhere else

``nox -s experiments`` runs the full configuration (under 30 minutes on the 2-core CPU
machine); the committed results record the commit, the machine, the library versions,
every seed and the corpus hash.  The code that trains and evaluates is
:mod:`posenc.analysis.experiments`, the same code the book's chapter runs live.

What runs (the full configuration; ``--quick`` shrinks every number):

* Task 1, language modelling on the docutils sources (bytes): one model per encoding
  (NoPE, learned, sinusoidal, RoPE, ALiBi, T5 bias) trained on windows of
  ``train_length`` tokens, perplexity at 1x to 16x that length.  The RoPE models are also
  evaluated with PI, NTK-aware, YaRN and Llama 3.1 scaling applied zero-shot through
  :func:`posenc.rope_frequencies` (factor = evaluation length / training length), and after
  a short fine-tune with PI at 4x the length, as the PI paper does.
* Task 2, copying a random string: accuracy on strings 1x to 8x the training length.
* Every configuration with several seeds; the summary gives mean and spread.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from posenc.analysis.experiments import train as T  # noqa: E402
from posenc.analysis.experiments.corpus import load_corpus  # noqa: E402
from posenc.analysis.experiments.models import ENCODINGS, ModelConfig  # noqa: E402

SCHEMA = 1
THREADS = 2

#: Sized to finish in under 30 minutes on the 2-core CPU machine: one training step of the
#: LM (batch 32 x 128 tokens, d_model 64) takes about 70 ms there.
FULL = {
    "seeds": [0, 1, 2],
    "model": {"d_model": 64, "n_heads": 4, "n_layers": 2},
    "lm": {"train_length": 128, "steps": 500, "batch": 32, "lr": 3e-3,
           "eval_factors": [1, 2, 4, 8, 16], "tokens_per_length": 16384},
    "pi_finetune": {"factor": 4, "steps": 100, "batch": 8, "lr": 1e-3},
    "copy": {"m": 16, "steps": 500, "batch": 32, "lr": 3e-3, "eval_factors": [1, 2, 4, 8],
             "n_eval": 256},
}
QUICK = {
    "seeds": [0],
    "model": {"d_model": 32, "n_heads": 2, "n_layers": 1},
    "lm": {"train_length": 16, "steps": 8, "batch": 4, "lr": 3e-3,
           "eval_factors": [1, 2], "tokens_per_length": 256},
    "pi_finetune": {"factor": 2, "steps": 2, "batch": 2, "lr": 1e-3},
    "copy": {"m": 4, "steps": 8, "batch": 8, "lr": 3e-3, "eval_factors": [1, 2], "n_eval": 16},
}

#: RoPE scaling applied zero-shot at evaluation, as ``rope_parameters`` for a factor s.
SCALINGS = {
    "pi": lambda s, L: {"rope_type": "linear", "factor": s},
    "ntk": lambda s, L: {"rope_type": "dynamic", "factor": s},
    "yarn": lambda s, L: {"rope_type": "yarn", "factor": s,
                          "original_max_position_embeddings": L},
    "llama3": lambda s, L: {"rope_type": "llama3", "factor": s, "low_freq_factor": 1.0,
                            "high_freq_factor": 4.0, "original_max_position_embeddings": L},
}


def provenance() -> dict:
    def git(*args):
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                                  check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return None

    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import importlib.metadata as md

    return {
        "commit": git("rev-parse", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--", "posenc", "experiments")),
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {"cpu": cpu, "cores": os.cpu_count(), "threads": torch.get_num_threads(),
                    "platform": platform.platform()},
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "numpy": np.__version__, "posenc": md.version("posenc")},
    }


def _mean_spread(values):
    vals = [v for v in values if v is not None]
    if len(vals) != len(values) or not vals:
        return None
    return {"mean": float(np.mean(vals)), "std": float(np.std(vals)),
            "min": float(np.min(vals)), "max": float(np.max(vals)), "n": len(vals)}


def run(config: dict, progress: bool) -> dict:
    corpus = load_corpus()
    lm, cp = config["lm"], config["copy"]
    L = lm["train_length"]
    lengths = [L * f for f in lm["eval_factors"]]
    runs = []
    for encoding in ENCODINGS:
        for seed in config["seeds"]:
            cfg = ModelConfig(encoding, train_length=L, **config["model"])
            res = T.train_lm(cfg, corpus, steps=lm["steps"], batch=lm["batch"], lr=lm["lr"],
                             seed=seed, progress=progress)
            t0 = time.perf_counter()
            ppl = T.eval_lm(res.model, corpus, lengths, tokens_per_length=lm["tokens_per_length"])
            runs.append({"task": "lm", "encoding": encoding, "variant": "trained", "seed": seed,
                         "config": cfg.to_dict(), "losses": res.losses,
                         "train_seconds": res.seconds,
                         "eval_seconds": time.perf_counter() - t0, "perplexity": ppl})
            if encoding != "rope":
                continue
            for name, make in SCALINGS.items():
                t0, ppl = time.perf_counter(), {}
                for length in lengths:
                    s = length / L
                    res.model.set_rope(make(s, L) if s > 1 else None)
                    ppl.update(T.eval_lm(res.model, corpus, [length],
                                         tokens_per_length=lm["tokens_per_length"]))
                res.model.set_rope(None)
                runs.append({"task": "lm", "encoding": "rope", "variant": f"{name} zero-shot",
                             "seed": seed, "eval_seconds": time.perf_counter() - t0,
                             "perplexity": ppl})
            ft = config["pi_finetune"]
            res.model.set_rope({"rope_type": "linear", "factor": float(ft["factor"])})
            tuned = T.train_lm(cfg, corpus, steps=ft["steps"], batch=ft["batch"], lr=ft["lr"],
                               seed=seed, progress=progress, model=res.model,
                               length=L * ft["factor"])
            t0 = time.perf_counter()
            ppl = T.eval_lm(tuned.model, corpus, lengths, tokens_per_length=lm["tokens_per_length"])
            runs.append({"task": "lm", "encoding": "rope", "variant": "pi fine-tuned",
                         "seed": seed, "losses": tuned.losses, "train_seconds": tuned.seconds,
                         "eval_seconds": time.perf_counter() - t0, "perplexity": ppl})
    ms = [cp["m"] * f for f in cp["eval_factors"]]
    for encoding in ENCODINGS:
        for seed in config["seeds"]:
            cfg = ModelConfig(encoding, train_length=2 * cp["m"] + 1, **config["model"])
            res = T.train_copy(cfg, m=cp["m"], steps=cp["steps"], batch=cp["batch"],
                               lr=cp["lr"], seed=seed, progress=progress)
            t0 = time.perf_counter()
            acc = T.eval_copy(res.model, ms, n=cp["n_eval"], seed=seed)
            runs.append({"task": "copy", "encoding": encoding, "variant": "trained",
                         "seed": seed, "config": cfg.to_dict(), "losses": res.losses,
                         "train_seconds": res.seconds, "eval_seconds": time.perf_counter() - t0,
                         "accuracy": acc})
    return {"corpus": corpus.provenance(), "runs": runs, "summary": summarise(runs)}


def summarise(runs: list) -> dict:
    """Mean and spread over seeds, per task, encoding, variant and length."""
    groups: dict = {}
    for r in runs:
        metric = r.get("perplexity") or r.get("accuracy")
        key = f'{r["task"]}|{r["encoding"]}|{r["variant"]}'
        for length, v in metric.items():
            groups.setdefault(key, {}).setdefault(str(length), []).append(v)
    return {k: {length: _mean_spread(v) for length, v in d.items()} for k, d in groups.items()}


def write_markdown(results: dict) -> str:
    p, s = results["provenance"], results["summary"]
    lines = [
        "# Experiments: results",
        "",
        f"Commit `{p['commit']}`{' (with uncommitted changes)' if p['dirty'] else ''}, "
        f"{p['date']}; {p['machine']['cpu']}, {p['machine']['threads']} threads; "
        f"torch {p['versions']['torch']}, numpy {p['versions']['numpy']}. "
        f"Total {results['seconds'] / 60:.1f} min. Corpus: {results['corpus']['package']} "
        f"{results['corpus']['version']} (sha256 {results['corpus']['sha256_train'][:12]}...).",
        "",
    ]
    for task, title, fmt in (("lm", "Perplexity (mean ± std over seeds)", "{:.2f} ± {:.2f}"),
                             ("copy", "Copy accuracy (mean ± std over seeds)", "{:.3f} ± {:.3f}")):
        keys = [k for k in s if k.startswith(task + "|")]
        if not keys:
            continue
        cols = list(s[keys[0]])
        lines += [f"## {title}", "", "| encoding | variant | " + " | ".join(cols) + " |",
                  "|---|---|" + "---:|" * len(cols)]
        for k in keys:
            _, enc, var = k.split("|")
            cells = [("n/a" if s[k][c] is None else fmt.format(s[k][c]["mean"], s[k][c]["std"]))
                     for c in cols]
            lines.append(f"| {enc} | {var} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a tiny run that checks the harness")
    ap.add_argument("--out", type=Path, default=ROOT / "experiments",
                    help="folder for results.json and results.md")
    ap.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = ap.parse_args(argv)
    torch.set_num_threads(THREADS)
    config = QUICK if args.quick else FULL
    start = time.perf_counter()
    body = run(config, progress=not args.no_progress)
    results = {"schema": SCHEMA, "quick": args.quick, "provenance": provenance(),
               "config": config, **body, "seconds": time.perf_counter() - start}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "results.md").write_text(write_markdown(results) + "\n")
    print(f"wrote {args.out / 'results.json'} in {results['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
