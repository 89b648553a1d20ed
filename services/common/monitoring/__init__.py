"""Prometheus plumbing several services share: a /metrics endpoint of its own registry and file-based service discovery."""
