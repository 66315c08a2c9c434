"""The errors profile-all raises on purpose.

`UsageError` is bad input (a missing script, an unknown backend, an unreadable run
directory): the CLI prints its message as one line and exits with code 2.
"""

import re

#: terminal colour and style codes, which torch writes into some messages
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class ProfileAllError(Exception):
    """Base of every error profile-all raises on purpose."""


class UsageError(ProfileAllError):
    """Bad input from the user; the CLI turns it into one line on stderr and exit code 2."""

    exit_code = 2


def one_line(error: BaseException) -> str:
    """`Type: message` on one line, for a pass's status and a usage error: the message's
    first line, and its last when there are several (torch puts the cause last: "Weights
    only load failed. ... Unsupported global: ..."), without terminal codes."""
    lines = [line.strip() for line in _ANSI.sub("", str(error)).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    ends = lines[:1] + lines[-1:] if len(lines) > 1 else lines
    return f"{type(error).__name__}: {' … '.join(ends)}"


class SaveError(ProfileAllError):
    """The report could not be written (a full disk, a quota, a folder made read-only):
    one line that says where what was measured is kept, and exit code 74 (sysexits'
    EX_IOERR), apart from a script's own codes and from bad input."""

    exit_code = 74
