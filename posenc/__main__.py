"""``python -m posenc inspect config.json``: what a model does with positions.

Prints the row :func:`posenc.atlas.describe_config` computes for a Hugging Face
``config.json`` (or one of the atlas's files, ``posenc/atlas/data/*.json``) (``--json`` for machine-readable output, ``--plot FILE`` to save the
spectrum figure).  Exit status 0 on success, 2 for a config it does not understand
(the message says which key and why), as for a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["main"]


def _parser():
    parser = argparse.ArgumentParser(prog="python -m posenc", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    inspect = sub.add_parser("inspect", help="describe the positions of a config.json")
    inspect.add_argument("config", help="path to a Hugging Face config.json")
    inspect.add_argument("--name", help="model name to print (default: _name_or_path)")
    inspect.add_argument("--json", action="store_true", help="print the row as JSON")
    inspect.add_argument("--plot", metavar="FILE", help="save the frequency spectrum figure")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    from .atlas import describe_config, format_description, load_config

    try:
        config = load_config(args.config)
        name = args.name
        if {"config", "facts", "sources"} <= set(config):  # an atlas file: its config
            name, config = name or config.get("name"), config["config"]
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
        try:
            from .figures.models import model_spectrum_figure

            fig = model_spectrum_figure(description)
        except ModuleNotFoundError as exc:
            if exc.name is None or exc.name.split(".")[0] != "matplotlib":
                raise
            print("posenc inspect: --plot needs matplotlib, which is not installed: "
                  "pip install 'posenc[figures]'", file=sys.stderr)
            return 2
        fig.savefig(args.plot)
        print(f"spectrum figure: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
