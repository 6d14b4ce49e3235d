"""``mhabench report``: a run as report.md (+ PNGs) and a self-contained report.html.

The report is first built as a list of blocks (:mod:`.blocks`, by :mod:`.sections`), then rendered
to Markdown (:mod:`.markdown`) or HTML (:mod:`.html`), so both formats always say the same thing;
:mod:`.files` writes them. The HTML embeds its images as base64 PNGs and its CSS inline: one file,
viewable offline, no script. Every string that comes from the user or the run (scenario names,
errors, config values) is escaped.
"""
