"""The request path's side of telemetry: the attempt's columns, the recorder that spools them,
breaker events, the recorders' status files. Never fails a request."""
