"""``mhabench report``: a run as report.md (+ PNGs) and a self-contained report.html."""
