"""Results kept over time: a history store keyed by case, implementation, machine fingerprint and the
commit of the code under test; series with change points; the CI gate; bisecting a plugin's commits."""
