"""The errors every command may end with: one the user can fix (`UserError`, printed as one
line and its hint), and a run stopped for good (`RunCannotGoOn`, its line printed already)."""

from __future__ import annotations


class UserError(Exception):
    """A problem the user can fix; `hint` says how."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


class RunCannotGoOn(RuntimeError):
    """A run stopped on an error every later document would meet too (a rejected key, an
    unknown model); its one line is printed already (kgstream/indexer.py). The next run
    resumes from the last snapshot once the setting is fixed."""
