"""User-facing errors.

Anything a user can get wrong (a path, a model, a budget, a flag) raises
``PockError`` with one line that says what is wrong and what to do. The CLI
prints it on stderr and exits with status 2; nothing else is printed.
"""


class PockError(Exception):
    """An error caused by the user's input, reported as one line, exit status 2."""

    exit_code = 2
