"""python -m posenc inspect config.json: what a model does with positions.

Prints the row :func:`posenc.atlas.describe_config` computes for a Hugging Face
``config.json`` (or one of the atlas's files, ``posenc/atlas/data/*.json``) (``--json``
for machine-readable output, ``--plot FILE`` to save the spectrum figure).  Exit status
0 on success, 2 for a config it does not understand (the message says which key and
why) or ``--plot`` without matplotlib, as for a usage error, and 1 when the reader of
its output stops early (``| head``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

__all__ = ["main"]


def _parser():
    parser = argparse.ArgumentParser(prog="python -m posenc", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    inspect = sub.add_parser("inspect", help="describe the positions of a config.json")
    inspect.add_argument("config", help="path to a Hugging Face config.json")
    inspect.add_argument("--name", help="model name to print (default: _name_or_path, else "
                         "the folder of the config.json)")
    inspect.add_argument("--json", action="store_true", help="print the row as JSON")
    inspect.add_argument("--plot", metavar="FILE", help="save the frequency spectrum figure")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("posenc inspect: --plot needs matplotlib, which is not installed. Install "
                  "posenc's figures extra: pip install \"posenc[figures] @ "
                  "git+https://github.com/posenc/posenc\" (in a clone: pip install "
                  "\".[figures]\").", file=sys.stderr)
            return 2
    from .atlas import describe_config, format_description, load_config

    try:
        config = load_config(args.config)
        name = args.name
        if {"config", "facts", "sources"} <= set(config):  # an atlas file: its config
            name, config = name or config.get("name"), config["config"]
        elif name is None and not config.get("_name_or_path"):  # published files have none
            path = Path(args.config).resolve()
            name = path.name if path.is_dir() else (
                path.parent.name if path.name == "config.json" else path.stem)
        description = describe_config(config, name=name)
    except (ValueError, TypeError) as exc:
        message = " ".join(str(exc).split())  # one line, of a readable length
        if len(message) > 400:
            message = message[:397] + "..."
        print(f"posenc inspect: {args.config}: {message}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(description.row(), indent=1))
    else:
        print(format_description(description))
    if args.plot:
        from .figures.models import model_spectrum_figure

        model_spectrum_figure(description).savefig(args.plot)
        print(f"spectrum figure: {args.plot}")
    return 0


def _run() -> int:
    """:func:`main` for the shell: a reader that closes the pipe early ends it quietly."""
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # what is left to print goes nowhere, so the flush at exit does not fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return status


if __name__ == "__main__":
    sys.exit(_run())
