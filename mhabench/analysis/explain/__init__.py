"""``mhabench explain``: why an implementation is slower than the pick, stage by stage, in the user's terms."""
