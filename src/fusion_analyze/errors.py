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
    """How much goes to stderr besides errors: 0 (`-q`) nothing, 1 warnings and progress, 2 (`-v`) details."""

    level = 1
    debug = False  # `--debug`: a traceback with every error


def warn(message: str) -> None:
    """A warning on stderr: the answer may not be what the user thinks (no Ascend tree, a mismatched pair)."""
    if Verbosity.level >= 1:
        print(f"warning: {message}", file=sys.stderr, flush=True)


def note(message: str, level: int = 1) -> None:
    """Progress (level 1: a fetch that takes seconds) or a detail (level 2, `-v`) on stderr."""
    if Verbosity.level >= level:
        print(message, file=sys.stderr, flush=True)
