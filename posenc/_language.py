"""The language of the book's words (figure labels, table headings): ``"en"`` or ``"zh"``.

One setting below both :mod:`posenc.analysis` and :mod:`posenc.figures`, so that a page's
one :func:`posenc.figures.set_language` call sets the language of its figures and of the
analysis tables it renders, and :mod:`posenc.analysis` imports nothing from
:mod:`posenc.figures` (which needs matplotlib): the package's imports point downwards
only.

Examples
--------
>>> from posenc import _language
>>> _language.get_language() in _language.LANGUAGES
True
"""

from __future__ import annotations

__all__ = ["LANGUAGES", "get_language", "set_language", "check_language"]

#: The languages of the book.
LANGUAGES: tuple[str, ...] = ("en", "zh")

_state: dict[str, str] = {"language": "en"}


def check_language(language: object, name: str = "language") -> str:
    """Return ``language`` if it is one of :data:`LANGUAGES`.

    Raises
    ------
    ValueError
        Otherwise, naming the argument and the languages.
    """
    if not isinstance(language, str) or language not in LANGUAGES:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, LANGUAGES))}, "
                         f"got {language!r}")
    return language


def set_language(language: str) -> None:
    """Set the current language (no styling; :func:`posenc.figures.set_language` calls
    this and then restyles matplotlib).

    Raises
    ------
    ValueError
        If ``language`` is not ``"en"`` or ``"zh"``.
    """
    _state["language"] = check_language(language)


def get_language() -> str:
    """The current language, ``"en"`` or ``"zh"`` (``"en"`` until set)."""
    return _state["language"]
