"""The package's top level: what ``import posenc`` loads, and the names it promises."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import posenc


def _fresh(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def test_import_posenc_loads_no_analysis_module_and_no_torch():
    # A book page's execution is keyed on the modules it imported: an eager import of the
    # analysis modules here would make every page re-execute when one of them changes.
    loaded = _fresh("import json, sys, posenc; print(json.dumps(sorted(sys.modules)))")
    assert not [m for m in loaded if m.startswith("posenc.analysis")]
    assert not [m for m in loaded if m == "torch" or m.startswith("torch.")]


def test_lazy_names_import_only_their_own_module():
    loaded = _fresh("import json, sys, posenc; posenc.rope_decay_bound; "
                    "print(json.dumps(sorted(m for m in sys.modules "
                    "if m.startswith('posenc.analysis.'))))")
    assert loaded == ["posenc.analysis.decay"]


@pytest.mark.parametrize("name", sorted(posenc.__all__))
def test_every_promised_name_resolves_to_its_definition(name):
    value = getattr(posenc, name)
    assert name in dir(posenc)
    if callable(value) and hasattr(value, "__module__"):
        module = sys.modules[value.__module__]
        assert getattr(module, name) is value


def test_star_import_gives_every_promised_name():
    names = _fresh("import json; from posenc import *; import posenc; "
                   "print(json.dumps([n for n in posenc.__all__ if n not in globals()]))")
    assert names == []


def test_unknown_name_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="no attribute 'rotary_embedding'"):
        posenc.rotary_embedding  # noqa: B018
