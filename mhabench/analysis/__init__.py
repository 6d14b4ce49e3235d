"""Analysis: what the rows say. Speedups, paired statistics, spread and comparisons, computed, never rendered."""
