"""State shared across requests: breakers (in memory, SQLite, Redis), health scores, operator
switches and drills."""
