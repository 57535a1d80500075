"""Exercise self-checks: ``from attention_book.checks import ch01`` then ``ch01.<check>(answer)``.

Every check returns a :class:`~attention_book.checks.core.Verdict` that prints what passed,
what failed and a hint. See :mod:`attention_book.checks.core` for how to write one.
"""

from .core import HISTORY, REGISTRY, Hint, Verdict, history_as_dict, register  # noqa: F401
