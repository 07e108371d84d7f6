"""Build both languages of the book at once: what ``nox -s docs`` and ``nox -s tests`` run.

    python tools/build_site.py                  html of en and zh, in parallel
    python tools/build_site.py -b doctest       the {doctest} blocks of both languages
    python tools/build_site.py -- -E            arguments after -- go to sphinx-build

Each language is one ``sphinx-build -c . -W --keep-going`` process (warnings are
errors); the two run at the same time, each with its own environment and execution cache
(conf.py: ``_build/.jupyter_cache/<lang>``) and sharing the disk memo
(``_build/.memo``, :mod:`posenc.analysis._memo`).  Their output is printed as it comes,
each line prefixed with its language; if either fails, its whole output is printed again
at the end and the exit status is 1.  After an html build the language chooser and the
site-wide 404 page are copied to the root of ``_build/html``.  The last line reports the
Sphinx time of each language, the wall time and the CPU time (user + system, the
notebook kernels included).

``--sequential`` builds one language after the other (the configuration before
issue 16, kept for the build benchmark); ``--json FILE`` writes the times, exit
statuses and full outputs there; ``--no-quiet`` drops sphinx-build's ``-q`` (the
benchmark reads which pages were executed from the full log).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: What every notebook kernel writes to stderr as it starts (ipykernel 7, whose kernels
#: listen on localhost TCP ports): not a problem of the build, so not in its log, where a
#: reader took 26 of them in a successful build for trouble.
_KERNEL_TCP_NOTICE = "Kernel is running over TCP without encryption"
LANGS = ("en", "zh")


def _out_dir(build: Path, builder: str, lang: str) -> Path:
    return build / "html" / lang if builder == "html" else build / builder / lang


def _command(builder: str, lang: str, out: Path, extra: list[str], quiet: bool) -> list[str]:
    return [sys.executable, "-m", "sphinx", "-b", builder, "-c", ".", "-W", "--keep-going",
            *(["-q"] if quiet else []), *extra, f"docs/{lang}", str(out)]


class _Build:
    """One sphinx-build process whose output is echoed with a prefix and kept."""

    def __init__(self, lang: str, cmd: list[str], env: dict, echo: bool):
        self.lang = lang
        self.lines: list[str] = []
        self.echo = echo
        self.start = time.perf_counter()
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, errors="replace")
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            if _KERNEL_TCP_NOTICE in line:
                continue
            self.lines.append(line)
            if self.echo:
                sys.stdout.write(f"[{self.lang}] {line}")
                sys.stdout.flush()
        # wait4 rather than wait: the resource usage of sphinx-build and of every
        # notebook kernel it started (and reaped) is returned with the exit status.
        _, status, usage = os.wait4(self.proc.pid, 0)
        self.returncode = os.waitstatus_to_exitcode(status)
        self.proc.returncode = self.returncode
        self.seconds = time.perf_counter() - self.start
        self.cpu_seconds = usage.ru_utime + usage.ru_stime

    def join(self) -> "_Build":
        self.thread.join()
        return self


def build(builder: str = "html", extra: list[str] | None = None, *, sequential: bool = False,
          langs=LANGS, quiet: bool = True, echo: bool = True, env: dict | None = None) -> dict:
    """Build ``langs`` with ``builder``; return times, exit statuses and outputs."""
    build_dir = Path((env or os.environ).get("POSENC_BUILD_DIR", ROOT / "_build"))
    base_env = {**os.environ, **(env or {}), "PYTHONHASHSEED": "0"}
    wall = time.perf_counter()
    runs: list[_Build] = []
    for lang in langs:
        cmd = _command(builder, lang, _out_dir(build_dir, builder, lang), extra or [], quiet)
        run = _Build(lang, cmd, {**base_env, "POSENC_LANG": lang}, echo)
        if sequential:
            run.join()
        runs.append(run)
    for run in runs:
        run.join()
    wall = time.perf_counter() - wall
    return {
        "builder": builder,
        "parallel": not sequential,
        "wall_seconds": wall,
        "languages": {r.lang: {"seconds": r.seconds, "cpu_seconds": r.cpu_seconds,
                               "returncode": r.returncode, "output": "".join(r.lines)}
                      for r in runs},
    }


def summary(result: dict) -> str:
    langs = result["languages"]
    each = ", ".join(f"{lang} {r['seconds']:.1f} s" for lang, r in langs.items())
    cpu = sum(r["cpu_seconds"] for r in langs.values())
    how = "in parallel" if result["parallel"] else "one after the other"
    return (f"Sphinx time ({result['builder']}, {how}): {each}; "
            f"wall {result['wall_seconds']:.1f} s; CPU {cpu:.1f} s")


def finish_site(build_dir: Path) -> None:
    """The chooser at the root of the site, and a 404 page GitHub Pages can serve."""
    html = build_dir / "html"
    shutil.copyfile(ROOT / "docs" / "chooser" / "index.html", html / "index.html")
    # GitHub Pages answers every missing URL of a project site with its root 404.html;
    # the English one works from any path (its links are site-absolute) and links zh.
    shutil.copyfile(html / "en" / "404.html", html / "404.html")


def main(argv: list[str]) -> int:
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    else:
        extra = []
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-b", "--builder", default="html")
    parser.add_argument("--sequential", action="store_true")
    parser.add_argument("--no-quiet", action="store_true")
    parser.add_argument("--lang", action="append", choices=LANGS)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    result = build(args.builder, extra, sequential=args.sequential, langs=args.lang or LANGS,
                   quiet=not args.no_quiet)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
    failed = [lang for lang, r in result["languages"].items() if r["returncode"] != 0]
    for lang in failed:
        r = result["languages"][lang]
        print(f"\n===== sphinx-build -b {args.builder} for {lang} failed "
              f"(exit {r['returncode']}); its whole output: =====\n{r['output']}", flush=True)
    if failed:
        print(f"build failed: {', '.join(failed)}", file=sys.stderr, flush=True)
        return 1
    build_dir = Path(os.environ.get("POSENC_BUILD_DIR", ROOT / "_build"))
    if args.builder == "html" and set(result["languages"]) == set(LANGS):
        finish_site(build_dir)
        print(f"Site: {build_dir / 'html' / 'index.html'}")
    print(summary(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
