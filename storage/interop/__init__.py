"""Telemetry adapters: the twin's recorded quantities in the formats a real floor speaks.

``mapping`` is the one table of facts (quantity <-> format field, unit, entity, precision,
source); ``emit`` renders a run's frames in those formats and ``sinks`` publishes them (HTTP
services, files, an MQTT broker: ``--emit``); ``sources`` reads files, HTTP services and brokers,
``ingest`` parses and normalises what they give, ``observed`` records it (``twin ingest``).
"""
