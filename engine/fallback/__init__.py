"""The fallback chain: targets in order, one time budget, a decision after every failure."""
