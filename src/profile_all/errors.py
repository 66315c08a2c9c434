"""The errors profile-all raises on purpose.

`UsageError` is bad input (a missing script, an unknown backend, an unreadable run
directory): the CLI prints its message as one line and exits with code 2.
"""


class ProfileAllError(Exception):
    """Base of every error profile-all raises on purpose."""


class UsageError(ProfileAllError):
    """Bad input from the user; the CLI turns it into one line on stderr and exit code 2."""

    exit_code = 2
