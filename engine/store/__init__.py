"""The scheduler's store: the DuckDB schema and its migrations, spool ingest, published snapshots,
and the read side the dashboard uses.

Only the scheduler opens the database (`open_store`) and only it calls `ingest_spool` and
`publish*`, always from one thread at a time on its connection (a DuckDB connection is not for
concurrent use; give another thread `con.cursor()`). Everything else reads the published
Parquet files through `PublishedData`, which never touches the .duckdb file.

`publish` is left to its module (`from engine.store import publish` is the module, so that
`publish.publish(...)` reads as it does). `publish_recent_attempts` appends the attempts
ingested since its last call to the 24 h snapshot (engine.store.partitions.append).
"""

from engine.store.db import StoreLockedError, open_store
from engine.store.ingest import IngestResult, ingest_spool, prune_ledger
from engine.store.migrations import MIGRATIONS, Migration, SchemaTooNewError
from engine.store.partitions import append as publish_recent_attempts
from engine.store.partitions import compact as compact_recent_attempts
from engine.store.publish import Snapshot, read_manifest
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
    "compact_recent_attempts",
    "ingest_spool",
    "open_store",
    "prune_ledger",
    "publish_recent_attempts",
    "read_manifest",
]
