"""What a person reads: terminal tables, the run summary, compare and spread output, the report and its plots."""
