"""Checks of mhabench itself: its CPU timing against an independent timer, and every CUDA path on a GPU machine."""
