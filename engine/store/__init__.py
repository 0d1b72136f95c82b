"""The scheduler's store: the DuckDB schema and its migrations, spool ingest, rollups, incidents
tables and the traffic profile.

Only the scheduler opens the database (`open_store`) and only it calls `ingest_spool`, always
from one thread at a time on its connection (a DuckDB connection is not for concurrent use; give
another thread `con.cursor()`). What it publishes for everyone else is in `engine.published`.
"""

from engine.store.db import StoreLockedError, open_store
from engine.store.ingest import IngestResult, ingest_spool, prune_ledger
from engine.store.migrations import MIGRATIONS, Migration, SchemaTooNewError

__all__ = [
    "MIGRATIONS",
    "IngestResult",
    "Migration",
    "SchemaTooNewError",
    "StoreLockedError",
    "ingest_spool",
    "open_store",
    "prune_ledger",
]
