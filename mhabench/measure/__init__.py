"""Measurement: timing, peak memory, counted ops, drift, communication, device peaks and the roofline."""
