"""The snapshots the scheduler publishes for the dashboard and the reports, and how they are
read. Readers never open the .duckdb file."""
