"""The traffic profile's queries: what the what-if scenarios read to build a scenario from the
team's own traffic (simulations.whatif.from_store), over the snapshots the scheduler's traffic
profile job publishes (engine.store.traffic_profile; their shapes in engine.published.catalogue).

A window [since, until) of minutes; sizes and latency of every hour it touches.
"""

from __future__ import annotations

from engine.published.query import Query

PROFILE_QUERIES: dict[str, Query] = {
    "traffic_minute": Query(
        """
        SELECT * FROM traffic_minute
        WHERE ($since IS NULL OR bucket >= $since) AND ($until IS NULL OR bucket < $until)
        ORDER BY bucket, route
        """,
        ("traffic_minute",),
        {"since": None, "until": None},
    ),
    "traffic_sizes": Query(
        """
        SELECT * FROM traffic_sizes
        WHERE ($since IS NULL OR hour > $since::TIMESTAMPTZ - INTERVAL 1 HOUR)
          AND ($until IS NULL OR hour < $until)
        ORDER BY hour, route
        """,
        ("traffic_sizes",),
        {"since": None, "until": None},
    ),
    "target_latency": Query(
        """
        SELECT * FROM target_latency
        WHERE ($since IS NULL OR hour > $since::TIMESTAMPTZ - INTERVAL 1 HOUR)
          AND ($until IS NULL OR hour < $until)
        ORDER BY hour, target
        """,
        ("target_latency",),
        {"since": None, "until": None},
    ),
    "incident_minutes": Query(
        """
        SELECT * FROM incident_minutes
        WHERE ($incident_ids IS NULL OR list_contains($incident_ids, incident_id))
        ORDER BY incident_id, bucket, target, error_class
        """,
        ("incident_minutes",),
        {"incident_ids": None},
    ),
    # Incidents a what-if can replay: ended, about one target, with their minutes published.
    "replayable_incidents": Query(
        """
        SELECT * FROM incidents
        WHERE target IS NOT NULL AND ended_at IS NOT NULL
          AND incident_id IN (SELECT incident_id FROM incident_minutes)
          AND ($since IS NULL OR ended_at >= $since)
        ORDER BY started_at DESC
        """,
        ("incidents", "incident_minutes"),
        {"since": None},
    ),
}
