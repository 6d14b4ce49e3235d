"""``mhabench probe``: the seeds' claims about what attention does, measured, each with a verdict.

``config`` reads probe files, ``inputs`` draws weights and tokens, ``attention_stats`` holds the statistics,
``measure`` applies them to a case, ``theory`` and ``claims`` turn them into verdicts, ``run``
writes the run folder, ``table`` and ``report`` show the verdicts.
"""
