"""Domain errors: each carries a one-line message that tells the user what to do. Warnings and progress notes:
one line each on stderr, as loud as the command line asks (`-q`: none, `-v`: details too)."""

import sys


class UserError(Exception):
    """A problem with the user's input; the CLI prints the message and exits with `code`."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.message = message
        self.code = code


class Verbosity:
    """How much goes to stderr besides errors: 0 (`-q`) nothing, 1 warnings and progress, 2 (`-v`) details; and in
    which language (`--lang` of the command, set once it is known)."""

    level = 1
    debug = False  # `--debug`: a traceback with every error
    lang = "en"


def localized(message: str) -> str:
    """A sentence of ir/texts.py (a `Said`: it knows its key) in Verbosity.lang; any other text as it is."""
    say_in = getattr(message, "in_language", None)
    return say_in(Verbosity.lang) if say_in is not None else message


def warn(message: str) -> None:
    """A warning on stderr: the answer may not be what the user thinks (no Ascend tree, a mismatched pair). The
    `warning:` tag stays as it is in every language (as `error:` does): scripts look for it."""
    if Verbosity.level >= 1:
        print(f"warning: {localized(message)}", file=sys.stderr, flush=True)


def note(message: str, level: int = 1) -> None:
    """Progress (level 1: a fetch that takes seconds) or a detail (level 2, `-v`) on stderr."""
    if Verbosity.level >= level:
        print(localized(message), file=sys.stderr, flush=True)
