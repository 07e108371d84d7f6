"""Does a model trained to read a longer window use it?  Each reference model (trained at
``f`` times the training length, :meth:`experiments.stage_lm.Runner.references`) read
again at every evaluation length up to its own, in one unit: the same weights, the same
target bytes at every length, so the only thing that changes is how much history precedes
them.  Keyed on its own import closure (with the language models' stage, whose ``Runner``
loads the weights), so adding it left every other unit as it was.

The question is the one a comparison *between* models cannot answer cleanly: a reference
trained at ``4 L`` reading ``4 L`` against a model trained at ``L`` reading ``L`` also
compares two differently trained models (the reference sees a quarter of the windows per
step).  Within one reference, reading ``L`` against reading ``4 L`` on the far-identifier
targets measures the longer history alone.  The unit records a hash of the weights it read
(:func:`weights_digest`), since a model's weights are retrained where the cache lacks them.
"""

from __future__ import annotations

import hashlib

from experiments.stage_lm import Runner
from posenc.analysis.experiments import train as T


def weights_digest(model) -> str:
    """SHA-256 (12 hex digits) of a model's parameters and buffers, name by name."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode() + b"\0" + t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:12]


def reference_context(runner: Runner, references: list[dict]) -> list[dict]:
    """For each reference of ``references`` (the stage's stored runs), its losses at every
    evaluation length up to its training length, from one load of its weights (unit
    ``refctx-<reference key>``)."""
    lm = runner.config["lm"]
    out = []
    for ref in references:
        n_ref = ref["train_length"]
        lengths = [n for n in runner.lengths if n <= n_ref]
        cfg = runner.cfg(ref["encoding"], ref["embed_scale"], train_length=n_ref)

        def fn(ref=ref, cfg=cfg, lengths=lengths):
            model = runner.load(cfg, ref["key"])
            return {"encoding": ref["encoding"], "seed": ref["seed"],
                    "train_length": ref["train_length"], "reads": ref["key"],
                    "weights": weights_digest(model),
                    "test": T.eval_lm(model, runner.corpus.test, runner.chunks, lengths,
                                      bucket=lm["bucket"], far=runner.far)}
        key = "refctx-" + ref["key"].removeprefix("ref-")
        out.append(runner.unit(key, fn, {"model": runner._digests[ref["key"]],
                                         "lengths": lengths}))
    return out
