"""The rate search the rate checks share (:mod:`experiments.stage_refrates`,
:mod:`experiments.stage_ablrates`): a model trained at every rate of a log-spaced grid on
one seed, the best by validation loss, the grid extended past an edge where the best lands.
Not a stage: each check that imports it is keyed on it as well.
"""

from __future__ import annotations

from collections.abc import Callable


def search(lrs, own_lr: float, score: Callable[[float], dict], max_extensions: int,
           beyond: Callable[[list, float, bool], float]) -> tuple[dict, float]:
    """Score every rate of ``lrs`` and ``own_lr`` (``score(lr)``: a dict with ``"valid"``,
    the validation loss of the model trained at ``lr``); where the best lies on an edge of
    the grid, add the next point past it (``beyond(grid, best, up)``) and score again, at
    most ``max_extensions`` times.  Returns ``({lr: score}, best lr)``.

    >>> loss = {1e-3: 3.0, 1e-2: 2.0, 1e-1: 2.5, 1e-4: 4.0}
    >>> runs, best = search([1e-3, 1e-2], 1e-2, lambda lr: {"valid": loss[lr]}, 2,
    ...                     lambda g, v, up: v * 10 if up else v / 10)
    >>> sorted(runs), best
    ([0.001, 0.01, 0.1], 0.01)
    """
    if max_extensions < 0:
        raise ValueError(f"max_extensions must be >= 0, got {max_extensions}")
    grid = sorted(set(map(float, lrs)) | {float(own_lr)})
    runs: dict[float, dict] = {}
    for round_ in range(1 + max_extensions):
        for lr in grid:
            if lr not in runs:
                runs[lr] = score(lr)
        best = min(runs, key=lambda lr: runs[lr]["valid"])
        if round_ == max_extensions or best not in (grid[0], grid[-1]):
            break
        up = best == grid[-1]
        nxt = beyond(grid, best, up)
        grid = grid + [nxt] if up else [nxt] + grid
    return runs, best
