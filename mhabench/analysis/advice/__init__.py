"""``mhabench advise``: which implementation to run for each case, where the answer changes, and why."""
