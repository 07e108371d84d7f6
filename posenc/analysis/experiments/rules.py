"""The RoPE scaling rules the protocol applies to trained models, as ``rope_parameters``.

Shared by the CPU tier's language-model stage and the GPU tier, so both apply the same
rules the same way.
"""

from __future__ import annotations


def scaling_parameters(kind: str, s: float, L: int, head_dim: int, base: float) -> dict:
    """``rope_parameters`` of each zero-shot scaling arm for factor ``s`` over length ``L``.

    ``ntk`` is the static NTK-aware rule: the base times ``s ** (d / (d - 2))`` for head
    width ``d``.  ``dynamic`` is transformers' dynamic NTK with factor 1, whose base grows
    with the length read: at a length ``n`` past ``L`` it equals the static rule for
    ``s = n / L`` (its factor is not ``s``: a factor ``s`` there would scale twice).
    """
    if kind == "pi":
        return {"rope_type": "linear", "factor": float(s)}
    if kind == "ntk":
        return {"rope_type": "default",
                "rope_theta": float(base * s ** (head_dim / (head_dim - 2)))}
    if kind == "yarn":
        return {"rope_type": "yarn", "factor": float(s), "original_max_position_embeddings": L}
    if kind == "llama3":
        return {"rope_type": "llama3", "factor": float(s), "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": L}
    if kind == "dynamic":
        return {"rope_type": "dynamic", "factor": 1.0}
    raise ValueError(f"kind must be one of pi, ntk, yarn, llama3, dynamic, got {kind!r}")


def matched_kinds(types) -> list[str]:
    """The rules that take a factor (``dynamic`` reads the length itself: its matched form
    is ``ntk``'s)."""
    return [k for k in types if k != "dynamic"]
