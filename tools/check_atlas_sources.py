"""Check every quote of the atlas (posenc/atlas/data/*.json) in its source file, at its
recorded revision, in local git mirrors of the source repositories.

    python tools/check_atlas_sources.py MIRRORS      # MIRRORS/<owner>+<name>/repo (bare or not)

The package's tests check each atlas value against the quote recorded beside it; this
script checks the quotes against the sources themselves.  It needs clones of the source
repositories, which CI cannot fetch (no network), so it runs by hand whenever an atlas
file is added or changed; the exit status is the number of quotes not found.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from posenc.atlas import atlas_entry, atlas_names  # noqa: E402


def missing_quotes(mirrors: Path, names: list[str] | None = None) -> list[str]:
    """``slug: key: quote`` for every recorded quote not found in its source file."""
    missing = []
    for slug in names if names is not None else atlas_names():
        entry = atlas_entry(slug)
        for fact in entry["facts"]:
            source = entry["sources"][fact["source"]]
            repo = mirrors / source["repository"].replace("/", "+") / "repo"
            try:
                body = subprocess.run(
                    ["git", "-C", str(repo), "show", f"{source['revision']}:{source['path']}"],
                    capture_output=True, text=True, check=True).stdout
            except (OSError, subprocess.CalledProcessError) as exc:
                missing.append(f"{slug}: {fact['key']}: cannot read {source['path']} at "
                               f"{source['revision'][:12]} in {repo} ({exc})")
                continue
            quotes = [fact["quote"]] if isinstance(fact["quote"], str) else fact["quote"]
            missing += [f"{slug}: {fact['key']}: {q!r}" for q in quotes if q not in body]
    return missing


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    missing = missing_quotes(Path(argv[0]))
    for line in missing:
        print("not found:", line)
    names = atlas_names()
    print(f"{len(names)} atlas files; {len(missing)} quotes not found")
    return min(len(missing), 125)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
