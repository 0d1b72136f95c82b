"""The scheduler's store: the DuckDB schema and its migrations, spool ingest, published snapshots,
and the read side the dashboard uses.

Only the scheduler opens the database (`open_store`) and only it calls `ingest_spool` and
`publish*`, always from one thread at a time on its connection (a DuckDB connection is not for
concurrent use; give another thread `con.cursor()`). Everything else reads the published
Parquet files through `PublishedData`, which never touches the .duckdb file.

`publish` is left to its module (`from engine.store import publish` is the module, so that
`publish.publish(...)` and `publish.publish_recent_attempts(...)` read as they do).
"""

from engine.store.db import StoreLockedError, open_store
from engine.store.ingest import IngestResult, ingest_spool, prune_ledger
from engine.store.migrations import MIGRATIONS, Migration, SchemaTooNewError
from engine.store.publish import Snapshot, publish_recent_attempts, read_manifest
from engine.store.read import QUERIES, PublishedData, Query

__all__ = [
    "MIGRATIONS",
    "QUERIES",
    "IngestResult",
    "Migration",
    "PublishedData",
    "Query",
    "SchemaTooNewError",
    "Snapshot",
    "StoreLockedError",
    "ingest_spool",
    "open_store",
    "prune_ledger",
    "publish_recent_attempts",
    "read_manifest",
]
