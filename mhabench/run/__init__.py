"""Running a config: launch, resume, shards, isolation, memory guard, one case's check → time → rows, the timed step."""
