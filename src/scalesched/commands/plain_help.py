"""``--help`` in plain words: option types as TEXT, INTEGER, FLOAT, PATH (nothing for a
flag), and help text without reStructuredText or accidental Rich markup.

Why here and not in each docstring: the library's docstrings are written for readers of the
code (``double backticks``, ``:func:`name```), and Typer shows a command's docstring as its
help; recent Typer also prints ``<bool>`` beside every flag and reads ``[...]`` in help text
as Rich markup (``[default: 20% of --workflows]`` vanished). One pass over the command tree
when the CLI starts fixes every command and sub-command, including ones added later; a test
walks every command's ``--help`` and fails on what this removes.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`]+)`")
"""``:func:`name``` and the like: the role goes, the name stays (as `name`)."""
_DOUBLE = re.compile(r"``([^`]+)``")

PLAIN_TYPES = {
    "str": "TEXT",
    "int": "INTEGER",
    "float": "FLOAT",
    "path": "PATH",
    "Path": "PATH",
    "int range": "INTEGER",
    "float range": "FLOAT",
    "list[str]": "TEXT",
    "list[int]": "INTEGER",
    "list[float]": "FLOAT",
    "list[path]": "PATH",
    "list[Path]": "PATH",
}
"""Typer's ``<type>`` labels and the plain names click has always shown. A ranged number
shows as a plain number: the range (``[0<=x<=9223372036854775807]`` for a seed) widened
the type column of every option beside it and squeezed the help text into a narrow strip,
and an option out of range is told its range when it is given (``scalesched.options``)."""


def plain_text(text: str | None) -> str | None:
    """Help text as a user reads it: reST roles and double backticks reduced to `name`,
    single line breaks inside a paragraph joined (Typer's Rich help keeps them, breaking
    lines mid-sentence), and square brackets escaped so Rich prints them."""
    if not text:
        return text
    from rich.markup import escape

    text = _DOUBLE.sub(r"`\1`", _ROLE.sub(r"`\1`", text))
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text.strip())]
    return escape("\n\n".join(p for p in paragraphs if p))


def plain_type(param: Any, ctx: Any) -> str | None:
    """The type column of one option: None for a flag, else a plain upper-case name."""
    if getattr(param, "is_flag", False) or getattr(param, "is_bool_flag", False):
        return None
    label = str(param.__class__.display_type_rich(param, ctx) or "")
    label = label.strip("<>")
    if not label:
        return None
    return PLAIN_TYPES.get(label, label.upper())


def install_plain_help(command: Any) -> None:
    """Rewrite the help of ``command``, its options and every sub-command (idempotent)."""
    if getattr(command, "_plain_help", False):
        return
    command._plain_help = True
    command.help = plain_text(getattr(command, "help", None))
    if getattr(command, "short_help", None):
        command.short_help = plain_text(command.short_help)
    for param in getattr(command, "params", []):
        if getattr(param, "help", None):
            param.help = plain_text(param.help)
        if hasattr(param.__class__, "display_type_rich"):
            param.display_type_rich = lambda ctx, p=param: plain_type(p, ctx)
        if hasattr(param, "_get_number_range_help_str"):
            param._get_number_range_help_str = lambda: ""
    make_help_option = getattr(command, "get_help_option", None)
    if make_help_option is not None:  # --help is made per call, outside ``params``

        def help_option(ctx: Any) -> Any:
            option = make_help_option(ctx)
            if option is not None and hasattr(option.__class__, "display_type_rich"):
                option.display_type_rich = lambda ctx: None
            return option

        command.get_help_option = help_option
    for sub in getattr(command, "commands", {}).values():
        install_plain_help(sub)
