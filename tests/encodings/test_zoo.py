"""The zoo: published config.json files (tests/zoo/*/config.json, sources in manifest.json).

For each file, ``describe_config`` must read what transformers 5.23 itself reads from the
same file (``AutoConfig.from_pretrained`` on the directory, then transformers' own
frequency code per layer type: tests/zoo/reference.py), or the command line must refuse
the file with exit status 2 and one line that names the key; never a different answer
with exit status 0.
"""

import json
import re
from pathlib import Path

import pytest

from posenc.__main__ import main
from posenc.atlas import describe_config, load_config

ZOO = Path(__file__).resolve().parents[1] / "zoo"
MANIFEST = json.loads((ZOO / "manifest.json").read_text(encoding="utf-8"))
SLUGS = [e["slug"] for e in MANIFEST]

#: Files posenc refuses, and the key its one-line message must name.
REFUSED = {
    "gpt2": "model_type",  # learned absolute positions: no RoPE to describe
    "snowflake-arctic-embed-m": "model_type",
    "phi-3.5-vision": "model_type",
    "ministral-3-3b-2512": "model_type",  # outer model_type is the text-only class: transformers ignores text_config  # remote code (phi3_v): transformers 5.23 has no class for it
}


def test_zoo_size_and_manifest():
    assert len(SLUGS) >= 40 and len(set(SLUGS)) == len(SLUGS)
    dirs = {p.parent.name for p in ZOO.glob("*/config.json")}
    assert dirs == set(SLUGS)
    for e in MANIFEST:
        assert re.fullmatch(r"[0-9a-f]{40}", e["commit"]), e["slug"]
        assert e["url"] == f"https://github.com/{e['repository']}/blob/{e['commit']}/{e['path']}"
        assert e["model"] and e["model_licence"] and e["form"] in ("preset", "quoted", "file")
    styles = {"rope_scaling" if "rope_scaling" in json.dumps(load_config(ZOO / s / "config.json"))
              else "rope_parameters" for s in SLUGS}
    assert styles == {"rope_scaling", "rope_parameters"}


@pytest.mark.parametrize("slug", SLUGS)
def test_zoo_file_reads_as_transformers_does(slug, capsys):
    from zoo.reference import assert_same_reading, transformers_reading

    path = ZOO / slug / "config.json"
    status = main(["inspect", str(path)])
    out, err = capsys.readouterr()
    if slug in REFUSED:
        assert status == 2 and out == "", (status, out)
        assert err.count("\n") == 1 and f"config[{REFUSED[slug]!r}]" in err, err
        return
    assert status == 0, err
    reference = transformers_reading(path.parent)
    assert_same_reading(describe_config(load_config(path)), reference)
