"""The collector's report commands (`report`, `compare`, `history`): each loads, renders through
the format registry and writes; collector/cli.py parses their flags and dispatches."""
