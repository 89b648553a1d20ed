"""The pure model of sysbench's workloads: the registry and the builders that fill it."""

# Importing the builder modules registers every workload (services.workload.registry.WORKLOADS).
from services.workload import oltp, random_select, sysbench05  # noqa: F401
