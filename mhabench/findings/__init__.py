"""Timed claims on the findings pages as data: parsed from the pages, graded against runs, re-stated from reports."""
