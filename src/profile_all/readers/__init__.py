"""Readers of native profiler files, each turning one file into report rows."""

from profile_all.errors import UsageError


class IngestError(UsageError):
    """A file a reader cannot read: corrupt, truncated, or not the format it claims."""
