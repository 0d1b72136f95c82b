"""What a route may do to a request and its answer: PII masking, per-target prompts, output
contracts and quality checks."""
