"""Telemetry adapters: the twin's recorded quantities in the formats a real floor speaks.

``mapping`` is the one table of facts (quantity <-> format field, unit, entity, precision,
source); ``emit`` writes a run's frames in those formats, ``ingest`` reads them back into the
``observed`` table (``observed``), ``servers`` holds the HTTP service the emitters answer on.
"""
