"""The snapshots the scheduler publishes for the dashboard and the reports, and how they are
read. Readers never open the .duckdb file; nothing here imports the store.

catalogue.py         every snapshot: its name, grain and columns (the contract)
publish.py           a snapshot written aside and renamed; the manifest
partitions.py        the 24 h of attempts as append-only parts, and their compaction
query.py             a named query: SQL, the snapshots it reads, its parameters
queries.py           the named queries (profile_queries.py: the what-if's)
read.py              `PublishedData`: the queries, over pinned snapshot files
scheduler_status.py  what the scheduler is doing, for the dashboard's sidebar
"""
