"""Errors the CLI reports in one line with exit status 2 (bad input, nothing started)."""


class UsageError(Exception):
    pass
