"""One vocabulary of ``--format`` names for every command, so a name one command takes works in all.

``report --format md`` and ``advise --format markdown`` once meant the same thing under two names and
each command refused the other's; here each format has one canonical name (``md``, ``html``,
``json``, ``terminal``) and the long spellings are aliases of it. A command says which formats it can
write; anything else is one line naming them.
"""

from __future__ import annotations

from collections.abc import Sequence

from mhabench.errors import InputError

ALIASES = {"markdown": "md", "htm": "html", "term": "terminal", "text": "terminal"}
"""Other spellings a user may reach for, each mapped to its canonical name."""


def parse_format(text: str, choices: Sequence[str], option: str = "--format") -> str:
    """The canonical name of ``text`` if the command writes it; else one line listing what it writes."""
    name = ALIASES.get(text.strip().lower(), text.strip().lower())
    if name not in choices:
        raise InputError(f"{option}: {text!r} is not one of {' | '.join(choices)}")
    return name
