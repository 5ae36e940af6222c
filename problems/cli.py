"""What every command line shares: a user's mistake is one line naming the flag, exit status 2.

Lives in `problems/` because every package imports it, so each CLI can use it without importing
upward. Two pieces:

- `CLIParser`: `argparse.ArgumentParser` whose usage errors (`invalid choice`, a missing
  argument, `parser.error(...)`) print one line, `PROG: error: MESSAGE (see PROG --help)`,
  instead of the usage block.
- `checked(parse)`: an argparse `type=` whose ValueError text is the flag's error line.
- `user_error(exc)`: one line for a mistake found after parsing; a pydantic `ValidationError`
  becomes `--turns 0: input should be greater than or equal to 1` (each field under its flag,
  never pydantic's text with its documentation URL). `CLIParser.fail(exc)` prints and exits.

    parser = CLIParser(prog="python -m experiments.evaluate")
    try:
        options = EvalOptions(**given)
    except ValueError as e:
        parser.fail(e, flags={"timing_trials": "--timing-trials"})
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from typing import NoReturn, TypeVar

from pydantic import ValidationError

__all__ = ["CLIParser", "checked", "flag_of", "user_error"]

T = TypeVar("T")


def checked(parse: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse `type=` from PARSE: its ValueError's text becomes the flag's error line
    (`argument --feedback: unknown feedback mode 'G+X'; expected one of G, G+E, G+E+P`)."""
    def convert(text: str) -> T:
        try:
            return parse(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(user_error(e)) from None

    convert.__name__ = getattr(parse, "__name__", "value").lstrip("_")
    return convert


Flags = Mapping[str, str] | Callable[[str], str] | None
"""How fields are named to the user: field -> flag (others `--field-name`), or a function."""


def flag_of(field: str, flags: Flags = None) -> str:
    """The command-line flag of a settings field: FLAGS[field], else `--field-name`."""
    if callable(flags):
        return flags(field)
    return (flags or {}).get(field) or f"--{field.replace('_', '-')}"


def user_error(error: BaseException, flags: Flags = None,
               known: Iterable[str] | None = None) -> str:
    """One line describing ERROR for the person who typed the command.

    Args:
        flags: field name -> flag, where a field's flag is not `--field-name` (`str`: the
            field's own name, for options given as NAME=VALUE or keys of a file).
        known: the accepted names, listed when a name is unknown (pydantic's `extra_forbidden`).
    """
    if not isinstance(error, ValidationError):
        return str(error) or type(error).__name__
    return "; ".join(_one(e, flags, known) for e in error.errors(include_url=False))


def _one(entry: dict, flags: Flags, known: Iterable[str] | None) -> str:
    loc = [str(part) for part in entry.get("loc", ())]
    flag = flag_of(loc[0], flags) if loc else "input"
    where = flag + "".join(f"[{part}]" for part in loc[1:])
    if entry.get("type") == "extra_forbidden":
        names = f" (known: {', '.join(sorted(known))})" if known is not None else ""
        return f"{where}: unknown name{names}"
    message = str(entry.get("msg", "")).removeprefix("Value error, ")
    message = message[:1].lower() + message[1:]
    value = entry.get("input")
    shown = "" if entry.get("type") == "missing" or isinstance(value, dict) else f" {value!r}"
    return f"{where}{shown}: {message}"


class CLIParser(argparse.ArgumentParser):
    """argparse, with every usage error on one line (exit 2) instead of the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} "
                     f"(see {self.prog} --help)\n")

    def fail(self, error: BaseException, flags: Flags = None,
             known: Iterable[str] | None = None) -> NoReturn:
        """Report a mistake found after parsing (see `user_error`) and exit 2."""
        self.error(user_error(error, flags, known))
