"""The GPU tier's plan spread over several processes on one device (``--workers N``).

One training step of the GPU tier's model launches many small kernels: on the H200 of
the first call each encoding's three stacked seeds took 60-90 ms a step, one group after
another (the device's use was not recorded then), and vmap (one launch for all seeds) did
not agree with the per-seed loop for five of the six encodings there (NaN gradients from
the fused causal kernel, a float bias refused beside bfloat16 queries; vmapped training
now calls the fused kernel on plain tensors, the seeds joined to the batch,
:class:`posenc.analysis.experiments.stacked._SeedsAttention`, or else writes the attention
out, and each process checks agreement again).  So the plan's groups run in ``N``
processes at once, each launching its own kernels, and the device interleaves them: in the
call of 2026-11-29 it was busy 95 % of the time with eight (``experiments/gpu-calls``).

* Worker ``i < 6`` trains priority 1 for ``ENCODINGS[i]``: every seed of the tier
  (``first_seeds`` and ``more_seeds`` stacked), so that each later comparison has all of
  them.  The RoPE and ALiBi stacks are saved for the groups that read them.
* Every worker then takes the next group of :func:`items` (priority order) whose stack is
  ready: scaling and the probes, the references, the fine-tuning arms, the tasks.  The
  other workers start on the groups that need no stack at once.
* The steps of every language model are the same, set once from the step times the six
  priority-1 workers measure for their groups, all at once (so under the same contention),
  and sized so that priority 1 takes ``first_share`` of the budget.

Each group runs through :meth:`experiments.stage_gpu.GpuPlan.run_item`, as in one process,
so a unit is keyed, trained and stored exactly as there; the store's file takes one line at
a time under a lock.  The parent writes ``results.json`` from the stored units every few
seconds and at the end, so a call cut short keeps every unit it finished.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import shutil
import tempfile
import time
import traceback
from pathlib import Path

from experiments.stage_gpu import item_name, items

#: the stacks later groups read, and whose priority-1 worker saves them
SHARED = ("rope", "alibi")
PENDING, READY, NONE = 0, 1, 2


def group_names(config: dict) -> set[str]:
    """Every group name of the plan, as :meth:`GpuPlan.guard` logs it (what ``run.py
    --groups`` may name)."""
    from posenc.analysis.experiments.models import ENCODINGS

    names = {f"lm-{e}" for e in ENCODINGS} | {f"lm-{e}-more" for e in ENCODINGS}
    names |= {item_name(it) for it in items(config)}
    names |= {f"probe-{e}-L{int(n)}" for e, n in config["plan"]["references"]}
    return names


def steps_for(times: list[float], left: float, plan: dict) -> int:
    """The language models' steps: priority 1's groups run side by side, so the slowest
    of them, at the step time measured under contention, must finish within
    ``first_share`` of what is left (less an allowance for its evaluation), in multiples of
    50 within ``[min_steps, max_steps]``.

    >>> steps_for([0.1, 0.2], 500.0, {"first_share": 0.5, "min_steps": 200,
    ...                                "max_steps": 4000})
    1100
    >>> steps_for([0.1], float("inf"), {"first_share": 0.5, "min_steps": 200,
    ...                                  "max_steps": 4000})
    4000
    """
    if left == float("inf"):
        return int(plan["max_steps"])
    room = plan["first_share"] * left - 30.0
    steps = int(room / max(times) // 50 * 50) if times else int(plan["min_steps"])
    return max(int(plan["min_steps"]), min(int(plan["max_steps"]), steps))


def _save(stack, path: Path) -> None:
    import torch

    tmp = path.with_suffix(".tmp")
    torch.save({k: v.detach().cpu() for k, v in stack.params.items()}, tmp)
    tmp.replace(path)


def _load(plan, enc: str, seeds, path: Path):
    import torch

    stack = plan.build(enc, seeds)
    saved = torch.load(path, map_location=plan.device)
    with torch.no_grad():
        for k, v in stack.params.items():
            v.copy_(saved[k])
    return stack


def _claim(claims, deps, lock, its) -> int | None:
    """The first unclaimed item whose stack is ready (or will not come), claimed; ``None``
    where none is claimable now; ``-1`` where none is left at all."""
    with lock:
        waiting = False
        for j, it in enumerate(its):
            if claims[j]:
                continue
            need = it[1]
            if need is not None and deps[SHARED.index(need)] == PENDING:
                waiting = True
                continue
            claims[j] = 1
            return j
        return None if waiting else -1


def worker(i: int, spec: dict, sync: dict) -> None:
    """One process of the plan (see the module's docstring)."""
    import sys

    sys.path.insert(0, spec["root"])
    import torch

    from experiments.stage_gpu import GpuPlan
    from posenc.analysis.experiments import corpus as C
    from posenc.analysis.experiments.models import ENCODINGS
    from posenc.analysis.experiments.units import Budget, UnitStore, stage_code

    def log(msg: str) -> None:
        print(f"[w{i}] {msg}", flush=True)

    torch.set_num_threads(spec["threads"])
    if spec["device"].startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    config, shared = spec["config"], Path(spec["shared"])
    corpus = C.load_corpus_file(Path(spec["corpus_file"]))
    store = UnitStore(spec["units"], spec["read"], jsonl=True, code=stage_code("gpu"))
    budget = Budget(spec["time_budget"], reserve=spec["reserve"], start=spec["start"])
    plan = GpuPlan(config, corpus, store, device=spec["device"], budget=budget,
                   steps=spec["steps"], use_vmap=spec["use_vmap"], log=log)
    seeds = list(config["plan"]["first_seeds"]) + list(config["plan"]["more_seeds"])
    plan.first = seeds
    its = items(config)
    order: list = []  # (rank, key, params) of every unit this worker's groups name
    meta_path = shared / f"w{i}.json"

    def write_meta() -> None:
        meta = {"keys": order, **plan.record()}
        tmp = meta_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(meta))
        tmp.replace(meta_path)

    def run(rank, name, fn, *args):
        before = len(plan.keys)
        try:
            return plan.guard(name, fn, *args)
        finally:
            order.extend([rank, k, p] for k, p in plan.keys[before:])
            write_meta()

    enc = ENCODINGS[i] if i < len(ENCODINGS) else None
    first_item = None
    try:
        # calibration: every priority-1 worker measures its group's step, all at once; the
        # others claim their first group and measure it when they train it (under the
        # same contention), so that none keeps the steps waiting (FlexAttention, which a
        # looping ALiBi reference may time, compiles first)
        t = None
        L = plan.L
        if enc is not None:
            t = plan.measure(enc, L, seeds)
        else:
            first_item = _claim(sync["claims"], sync["deps"], sync["lock"], its)
        sync["calib"].put((i, t))
        steps = sync["steps"][i].get()
        plan.steps = steps
        if enc is not None:
            stack = run((0, i), f"lm-{enc}", plan.lm_group, enc, L, seeds, steps)
            if enc in SHARED:
                j = SHARED.index(enc)
                if stack is not None:
                    _save(stack, shared / f"{enc}.pt")
                    sync["deps"][j] = READY
                else:
                    sync["deps"][j] = NONE
                del stack
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        while budget.left() > 0:
            if first_item is not None:
                j, first_item = first_item, None
            else:
                j = _claim(sync["claims"], sync["deps"], sync["lock"], its)
            if j == -1:
                break
            if j is None:
                time.sleep(0.5)
                continue
            it = its[j]
            need = it[1]
            stack = None
            if need is not None and (shared / f"{need}.pt").is_file():
                stack = _load(plan, need, seeds, shared / f"{need}.pt")
            rank = (1, j)
            plan.run_item(it, seeds, steps, stack,
                          call=lambda name, fn, *args, rank=rank: run(rank, name, fn, *args))
            del stack
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    except Exception as e:  # noqa: BLE001 - recorded for the parent, then the worker ends
        plan.errors.append({"group": f"worker {i}", "error": f"{type(e).__name__}: {e}"[:2000],
                            "traceback": traceback.format_exc()[-4000:]})
        log(f"failed: {type(e).__name__}: {str(e)[:500]}")
        if enc in SHARED and sync["deps"][SHARED.index(enc)] == PENDING:
            sync["deps"][SHARED.index(enc)] = NONE
    finally:
        write_meta()
    log("done")


def assemble(store_dir: Path, read: list, shared: Path, n_workers: int, code: str,
             its: list, claims) -> dict:
    """The plan's results from the stored units and the workers' records."""
    from posenc.analysis.experiments.units import UnitStore

    store = UnitStore(store_dir, read, jsonl=True, code=code)
    rows, step_ms, vmap, attention, skipped, errors = [], {}, {}, {}, [], []
    for i in range(n_workers):
        p = shared / f"w{i}.json"
        try:
            meta = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        rows += [(tuple(rank), n, key, params) for n, (rank, key, params)
                 in enumerate(meta["keys"])]
        for k, v in meta["step_ms"].items():
            step_ms.setdefault(k, v)
        vmap.update(meta["vmap"])
        attention.update(meta.get("attention", {}))
        skipped += meta["skipped"]
        errors += meta["errors"]
    units, seen = [], set()
    for _, _, key, params in sorted(rows, key=lambda r: (r[0], r[1])):
        u = store.get(key, params)
        if u is not None and key not in seen:
            seen.add(key)
            units.append(u)
    never = [item_name(it) for j, it in enumerate(its) if not claims[j]]
    # a group a worker found too long is named again when a later group asks for its stack
    return {"step_ms": step_ms, "vmap": vmap, "attention": attention, "skipped": list(dict.fromkeys(skipped + never)),
            "errors": errors, "units": units}


def run_parallel(config: dict, args, *, root: Path, start: float, plan_meta: dict,
                 write) -> int:
    """Run the GPU tier's plan in ``args.workers`` processes (see the module's docstring).

    ``start``: the :func:`time.perf_counter` value the budget counts from (the clock is
    the system's monotonic one, the same in every process); ``write(body)`` writes the
    results from the plan's part of them.  Returns an exit code: 3 where no unit was
    stored and a worker failed, so a caller can fall back to one process."""
    from posenc.analysis.experiments.models import ENCODINGS
    from posenc.analysis.experiments.units import Budget, stage_code

    n = int(args.workers)
    if n < len(ENCODINGS):
        raise ValueError(f"--workers must be 1 or at least {len(ENCODINGS)} (one process "
                         f"per encoding for priority 1), got {n}")
    if args.corpus_file is None:
        raise ValueError("--workers needs --corpus-file (each process reads the corpus)")
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    # the workers' records and the saved stacks: outside <out>, which a device call brings
    # back (a few files at most)
    shared = Path(tempfile.mkdtemp(prefix="posenc-gpu-"))
    read = [str(root / "experiments" / "units" / "gpu")] + [str(p) for p in args.resume_from]
    units_dir = str(args.units or out)
    budget = Budget(args.time_budget, reserve=args.reserve, start=start)
    ctx = mp.get_context("spawn")
    its = items(config)
    sync = {"lock": ctx.Lock(), "claims": ctx.Array("i", len(its), lock=False),
            "deps": ctx.Array("i", len(SHARED), lock=False), "calib": ctx.Queue(),
            "steps": [ctx.Queue() for _ in range(n)]}
    spec = {"root": str(root), "config": config, "shared": str(shared),
            "corpus_file": str(args.corpus_file), "units": units_dir, "read": read,
            "device": args.device, "threads": args.threads, "time_budget": args.time_budget,
            "reserve": args.reserve, "start": start, "steps": args.steps,
            "use_vmap": not args.no_vmap}
    procs = [ctx.Process(target=worker, args=(i, spec, sync), daemon=True) for i in range(n)]
    for p in procs:
        p.start()
    # the steps, from every worker's calibration (a worker that dies first is not waited for)
    times: list[float] = []
    got = 0
    while got < n:
        try:
            _, t = sync["calib"].get(timeout=5.0)
        except Exception:  # noqa: BLE001 - queue.Empty: see who is still alive
            if all(not p.is_alive() for p in procs) or budget.left() <= 0:
                break
            continue
        got += 1
        if t is not None:
            times.append(t)
    steps = args.steps or steps_for(times, budget.left(), config["plan"])
    seeds = list(config["plan"]["first_seeds"]) + list(config["plan"]["more_seeds"])
    print(f"language models: {steps} steps each, {len(seeds)} seeds stacked, {n} processes;"
          " step times " + ", ".join(f"{1000 * t:.0f} ms" for t in times)
          + f"; {budget.left():.0f} s left", flush=True)
    for q in sync["steps"]:
        q.put(steps)
    code = stage_code("gpu")
    meta = {**plan_meta, "steps": steps, "first_seeds": seeds,
            "parallel": {"workers": n, "calibration_ms": [1000 * t for t in times]}}

    def write_now() -> dict:
        body = assemble(Path(units_dir), read, shared, n, code, its, sync["claims"])
        write({**meta, **body})
        return body

    # the parent only watches: a dead worker's stack will not come, and the results are
    # written as the units come in
    last = 0.0
    try:
        while any(p.is_alive() for p in procs):
            for i, p in enumerate(procs):
                if not p.is_alive() and i < len(ENCODINGS) and ENCODINGS[i] in SHARED:
                    j = SHARED.index(ENCODINGS[i])
                    if sync["deps"][j] == PENDING:
                        sync["deps"][j] = NONE
            if time.perf_counter() - last > 20.0:
                write_now()
                last = time.perf_counter()
            if budget.left() < -60.0:  # well past the end: do not wait for a stuck worker
                for p in procs:
                    if p.is_alive():
                        p.terminate()
                break
            time.sleep(1.0)
        body = write_now()
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    codes = [p.exitcode for p in procs]
    print(f"wrote {out / 'results.json'} ({len(body['units'])} units); worker exit codes "
          f"{codes}", flush=True)
    if not body["units"] and (any(c != 0 for c in codes) or body["errors"]):
        return 3
    return 0
