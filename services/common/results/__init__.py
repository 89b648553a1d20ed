"""What runs measured, read back: the stored result row, the figures reports read, latency histograms, stalls, and sysbench's printed reports."""
