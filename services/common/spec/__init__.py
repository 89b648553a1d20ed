"""The campaign spec: its model, fields, targets, workloads, server options, durations, and reading spec.yaml safely."""
