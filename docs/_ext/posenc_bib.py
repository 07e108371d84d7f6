"""One citation style: the references page is labelled as the text cites.

The pages cite author-year ("[Touvron *et al.*, 2023]", "Su *et al.* [2021]"), and
pybtex's ``plain`` style numbers the references page ("[1]"), so a reader could not find
a cited work by its label.  Two pybtex plugins make both sides one style:

* the bibliography style ``posenc`` (pybtex's ``plain`` formatting, sorted by the
  names as cited, year and title) labels each entry with the same words the text cites it by -- the
  names as sphinxcontrib-bibtex's author-year style writes them, a comma, the year --
  and tells apart works with the same names and year by a letter after the year
  ("Hugging Face, 2025a", "Hugging Face, 2025b"), in the order of the whole
  bibliography, so that a label is the same on whichever references page lists it;
* the referencing style ``posenc_author_year`` is sphinxcontrib-bibtex's
  ``author_year`` with the year taken from that label, so the letter is in the text too.

conf.py selects them (``bibtex_default_style``, ``bibtex_reference_style``);
``posenc_site`` registers them.  tests/book/test_site.py checks that every citation in
the text is a label on the references page, in both languages.
"""

from __future__ import annotations

import functools
import string
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pybtex.plugin
from pybtex.richtext import Text
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.sorting import BaseSortingStyle
from pybtex.style.template import node
from sphinxcontrib.bibtex.style.referencing import PersonStyle
from sphinxcontrib.bibtex.style.referencing.author_year import AuthorYearReferenceStyle
from sphinxcontrib.bibtex.style.referencing.basic_author_year import (
    BasicAuthorYearParentheticalReferenceStyle,
    BasicAuthorYearTextualReferenceStyle,
)
from sphinxcontrib.bibtex.style.template import join, join2, post_text, pre_text, reference

LABEL_SEP = ", "


@dataclass
class _NameStyle:
    person: PersonStyle


def cited_names(entry) -> str:
    """The names the author-year style cites ``entry`` by, as plain text."""
    person = PersonStyle()
    text = person.author_or_editor_or_title(full=False).format_data(
        {"entry": entry, "style": _NameStyle(person)})
    return text.render_as("text")


def year_suffix(k: int) -> str:
    """The letters after the year of the ``k``-th work (from 0) sharing a label: a ... z,
    then aa, ab, ... as spreadsheet columns go."""
    letters = ""
    k += 1
    while k:
        k, rest = divmod(k - 1, 26)
        letters = string.ascii_lowercase[rest] + letters
    return letters


#: The book's one bibliography (docs/references.bib).
BIBFILE = Path(__file__).resolve().parents[1] / "references.bib"


def author_year_labels(sorted_entries) -> list[str]:
    """The labels of ``sorted_entries``: "<names>, <year>", with a, b, ... after the year
    where two of them would otherwise share a label."""
    plain = [f"{cited_names(e)}{LABEL_SEP}{e.fields.get('year', 'n.d.')}"
             for e in sorted_entries]
    counts, seen, labels = Counter(plain), Counter(), []
    for label in plain:
        if counts[label] == 1:
            labels.append(label)
        else:
            labels.append(label + year_suffix(seen[label]))
            seen[label] += 1
    return labels


@functools.cache
def book_labels(path: Path = BIBFILE) -> dict[str, str]:
    """Key -> label over the whole bibliography, so that a label names one work on
    whichever references page lists it (papers and other sources are two lists)."""
    from pybtex.database import parse_file

    entries = sorted(parse_file(str(path)).entries.values(),
                     key=AuthorYearSortingStyle().sorting_key)
    return dict(zip((e.key for e in entries), author_year_labels(entries)))


class AuthorYearLabelStyle(BaseLabelStyle):
    """Labels "<names>, <year>", with a, b, ... after the year where two entries of the
    book's bibliography would otherwise share a label."""

    def format_labels(self, sorted_entries):
        entries = list(sorted_entries)
        book = book_labels() if BIBFILE.is_file() else {}
        if all(e.key in book for e in entries):
            return [book[e.key] for e in entries]
        return author_year_labels(entries)


class AuthorYearSortingStyle(BaseSortingStyle):
    """By the names as cited (case and braces aside), then year, then title."""

    def sorting_key(self, entry):
        return (cited_names(entry).casefold(), entry.fields.get("year", ""),
                entry.fields.get("title", "").strip("{}").casefold())


class PosencStyle(PlainStyle):
    default_label_style = "posenc_author_year"
    default_sorting_style = "posenc_author_year"


@node
def label_year(children, data):
    """The year part of the entry's label ("2025a")."""
    assert not children
    return Text(data["formatted_entry"].label.rsplit(LABEL_SEP, 1)[-1])


@dataclass
class _Parenthetical(BasicAuthorYearParentheticalReferenceStyle):
    def inner(self, role_name):
        return join2(sep1=self.pre_text_sep, sep2=self.post_text_sep)[
            pre_text,
            reference[join(sep=self.author_year_sep)[
                self.person.author_or_editor_or_title(full="s" in role_name), label_year]],
            post_text,
        ]


@dataclass
class _Textual(BasicAuthorYearTextualReferenceStyle):
    def inner(self, role_name):
        return join(sep=self.text_reference_sep)[
            self.person.author_or_editor_or_title(full="s" in role_name),
            join[self.bracket.left,
                 join2(sep1=self.pre_text_sep, sep2=self.post_text_sep)[
                     pre_text, reference[label_year], post_text],
                 self.bracket.right],
        ]


@dataclass
class PosencAuthorYearReferenceStyle(AuthorYearReferenceStyle):
    """sphinxcontrib-bibtex's author_year, with the label's year ("2025a")."""

    def __post_init__(self):
        super().__post_init__()
        self.styles[0] = _Parenthetical(
            bracket=self.bracket_parenthetical, person=self.person,
            author_year_sep=self.author_year_sep, pre_text_sep=self.pre_text_sep,
            post_text_sep=self.post_text_sep)
        self.styles[1] = _Textual(
            bracket=self.bracket_textual, person=self.person,
            text_reference_sep=self.text_reference_sep, pre_text_sep=self.pre_text_sep,
            post_text_sep=self.post_text_sep)
        # GroupReferenceStyle maps role names to styles when it is built: map again.
        self.role_style = {}
        super(AuthorYearReferenceStyle, self).__post_init__()


def register() -> None:
    import sphinxcontrib.bibtex.plugin

    pybtex.plugin.register_plugin("pybtex.style.labels", "posenc_author_year",
                                  AuthorYearLabelStyle, force=True)
    pybtex.plugin.register_plugin("pybtex.style.sorting", "posenc_author_year",
                                  AuthorYearSortingStyle, force=True)
    pybtex.plugin.register_plugin("pybtex.style.formatting", "posenc", PosencStyle, force=True)
    sphinxcontrib.bibtex.plugin.register_plugin(
        "sphinxcontrib.bibtex.style.referencing", "posenc_author_year",
        PosencAuthorYearReferenceStyle, force=True)
