"""The errors of the storage layer, at its bottom: every module of ``storage`` and its callers
import them from here, and this module imports nothing.

``StorageError`` is a file the user named that cannot be used (bad input: exit code 2 of the
``twin`` commands); ``StorageIOError`` a file that could not be written or read for a reason of
the environment (a full or read-only disk, no permission, a file too large: exit code 74).
"""

from __future__ import annotations


class StorageError(Exception):
    """A telemetry file could not be created, opened or written."""


class StorageIOError(StorageError):
    """A telemetry file could not be written or read because of the environment (a full or
    read-only disk, no permission, a file-size limit), not because of what the user asked."""


class QueryError(Exception):
    """A user query was refused or failed."""
