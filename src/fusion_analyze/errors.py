"""Domain errors: each carries a one-line message that tells the user what to do."""


class UserError(Exception):
    """A problem with the user's input; the CLI prints the message and exits with `code`."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.message = message
        self.code = code
