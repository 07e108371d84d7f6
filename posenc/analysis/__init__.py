"""The book's measurements: what the chapters compute *about* the encodings.

Nothing here is needed to put an encoding in a model; the encodings themselves live at the
top of :mod:`posenc` (and :mod:`posenc.torch`).  One module per question a chapter asks:

- :mod:`~posenc.analysis.attention`: a tiny attention layer and token embeddings for the
  demonstrations (permutation equivariance, the causal mask, additive biases).
- :mod:`~posenc.analysis.closest`, :mod:`~posenc.analysis.similarity`,
  :mod:`~posenc.analysis.uniqueness`: distances, dot products by offset, collisions.
- :mod:`~posenc.analysis.decay`, :mod:`~posenc.analysis.precision`: RoPE's decay bound and
  float32 angle errors.
- :mod:`~posenc.analysis.requirements`: one checker per requirement an encoding must meet.
- :mod:`~posenc.analysis.rope_extras`: memory traffic per kernel of RoPE formulas.
- :mod:`~posenc.analysis.base_bound`: the smallest RoPE base a context length needs
  (Men et al. 2024) and the context a base can serve.
- :mod:`~posenc.analysis.remap`: training-free position remapping (Self-Extend's and STRING's offsets).
- :mod:`~posenc.analysis.other_encodings`: learned, relative, ALiBi and NoPE schemes side
  by side (scores under a shift, Transformer-XL's terms, costs per layer).
- :mod:`~posenc.analysis.pitfalls`: deliberately wrong implementations for the bug gallery
  (never exported).
"""
