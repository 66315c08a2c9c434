"""Readers of native profiler files, each turning one file into report rows."""

from profile_all.errors import UsageError


class IngestError(UsageError):
    """A file a reader cannot read: corrupt, truncated, or not the format it claims."""


class BrokenFile(IngestError):
    """A file of a kind read whose data is broken (truncated, corrupt): in a directory, a
    rank lost, which the report must say up front, unlike a file that is no trace."""
