"""Measurement: timing, peak memory, the cost model and the device roofline."""
