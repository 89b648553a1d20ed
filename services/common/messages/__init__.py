"""Wire contracts: versioned JSON messages (runs, results, events, announcements, parts, builds), their bounds, and decoding by schema (codec.py)."""
