"""Command lines for people: one-line errors, "did you mean", hidden aliases of renamed flags.

``Parser`` is ``argparse.ArgumentParser`` whose errors are one line on stderr and exit 2, naming
the closest command or flag when a word is misspelt (``unknown command 'alocate'; did you mean
'allocate'?``); its subcommand parsers are ``Parser`` too. ``quiet=True`` raises ``ArgvError``
(a ``SystemExit`` with code 2 and the line) without printing, for an entry point that prints
errors itself (``register.py --json`` prints them as JSON). ``alias(parser, "--old", dest=...)``
keeps an old spelling working, hidden from ``--help`` and from docs/cli.md, so scripts that used
it do not break when a flag is renamed.

Type helpers for ``add_argument(type=...)`` give one clear sentence for a bad value:
``count`` (an integer >= 0), ``positive``, ``non_negative`` (numbers), ``bounded(low, high)``.

Deliberately not here: what any command's flags are (each entry point declares its own).
"""

from __future__ import annotations

import argparse
import difflib
import math
import re
import sys
from collections.abc import Callable
from typing import Any, NoReturn

_CHOICE_RE = re.compile(r"argument (?P<what>[^:]+): invalid choice: '(?P<value>[^']*)'")
_UNKNOWN_RE = re.compile(r"unrecognized arguments: (?P<args>.*)$")


class ArgvError(SystemExit):
    """A bad command line: ``line`` says what and how to fix it; exit code 2."""

    def __init__(self, line: str) -> None:
        super().__init__(2)
        self.line = line


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` with one-line errors and suggestions for misspelt words."""

    def __init__(self, *args: Any, quiet: bool = False, **kwargs: Any) -> None:
        # every flag spelled out: a prefix (``--h``, ``--wallet.h``) is an error naming the flag it
        # may mean, never silently another flag (or ``--help``)
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.quiet = quiet

    def add_subparsers(self, **kwargs: Any) -> Any:
        quiet = self.quiet
        kwargs.setdefault("parser_class", lambda **kw: Parser(quiet=quiet, **kw))
        return super().add_subparsers(**kwargs)

    def error(self, message: str) -> NoReturn:
        line = f"{self.prog}: {self._explain(message)} (see {self.prog} --help)"
        if not self.quiet:
            sys.stderr.write(line + "\n")
        raise ArgvError(line)

    def option_strings(self) -> list[str]:
        """Every visible flag of this parser and of its subcommands."""
        found: list[str] = []
        for action in self._actions:
            if action.help is not argparse.SUPPRESS:
                found += [o for o in action.option_strings if o.startswith("--")]
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    if isinstance(sub, Parser):
                        found += sub.option_strings()
        return sorted(set(found))

    def _explain(self, message: str) -> str:
        choice = _CHOICE_RE.search(message)
        if choice is not None:
            value = choice.group("value")
            choices = self._choices(choice.group("what"))
            close = difflib.get_close_matches(value, choices, n=1, cutoff=0.6)
            if choice.group("what") == "COMMAND" or self._is_command(choice.group("what")):
                hint = f"; did you mean {close[0]!r}?" if close else f"; commands: {', '.join(choices)}"
                return f"unknown command {value!r}{hint}"
            hint = f"; did you mean {close[0]!r}?" if close else ""
            return f"{message}{hint}"
        unknown = _UNKNOWN_RE.search(message)
        if unknown is not None:
            flags = [word for word in unknown.group("args").split() if word.startswith("--")]
            known = self.option_strings()
            for flag in flags:
                close = difflib.get_close_matches(flag.split("=", 1)[0], known, n=1, cutoff=0.6)
                if close:
                    return f"unknown flag {flag}; did you mean {close[0]}?"
            return f"unexpected {unknown.group('args')}"
        return message

    def _commands(self) -> argparse._SubParsersAction | None:
        return next((a for a in self._actions if isinstance(a, argparse._SubParsersAction)), None)

    def _is_command(self, what: str) -> bool:
        subs = self._commands()
        return subs is not None and what in (subs.metavar, subs.dest)

    def _choices(self, what: str) -> list[str]:
        for action in self._actions:
            if what in (action.metavar, action.dest, *action.option_strings, "/".join(action.option_strings)):
                return [str(c) for c in action.choices or ()]
        return []


def alias(parser: argparse._ActionsContainer, flag: str, **kwargs: Any) -> None:
    """An old spelling of a flag, still accepted, hidden from ``--help`` (``dest`` names the new one's)."""
    parser.add_argument(flag, help=argparse.SUPPRESS, **kwargs)


def _number(text: str, kind: Callable[[str], float]) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a {'whole ' if kind is int else ''}number"
        ) from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def count(text: str) -> int:
    """An integer >= 0 (a number of GPUs, cores, ports)."""
    value = int(_number(text, int))
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative; give 0 or more")
    return value


def non_negative(text: str) -> float:
    value = _number(text, float)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative; give 0 or more")
    return value


def positive(text: str) -> float:
    value = _number(text, float)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be more than 0")
    return value


def bounded(low: float, high: float, kind: Callable[[str], float] = float) -> Callable[[str], float]:
    """A number in [low, high]."""

    def check(text: str) -> float:
        value = _number(text, kind)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is outside {low:g}..{high:g}")
        return value

    check.__name__ = f"number in {low:g}..{high:g}"
    return check


__all__ = ["ArgvError", "Parser", "alias", "bounded", "count", "non_negative", "positive"]
