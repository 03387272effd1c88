"""The errors of the storage layer, at its bottom: every module of ``storage`` and its callers
import them from here, and this module imports nothing."""

from __future__ import annotations


class StorageError(Exception):
    """A telemetry file could not be created, opened or written."""


class QueryError(Exception):
    """A user query was refused or failed."""
