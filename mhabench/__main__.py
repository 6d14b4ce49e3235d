"""``python -m mhabench``."""

from mhabench.cli import main

main()
