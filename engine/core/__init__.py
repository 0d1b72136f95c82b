"""The engine's vocabulary: messages, the attempt record, errors and their classification,
clock, money, paths and prices. Pure: it imports nothing else of the engine, and no HTTP
client, database or Redis."""
