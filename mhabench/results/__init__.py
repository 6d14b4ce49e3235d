"""Results on disk: the row schema, the run folder (rows, manifest, lifecycle, liveness) and merging shard runs."""
