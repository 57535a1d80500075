"""Exercise self-checks: ``from attention_book.checks import ch01`` then ``ch01.<check>(answer)``.

Every check returns a :class:`~attention_book.checks.core.Verdict` that prints what passed,
what failed and a hint. See :mod:`attention_book.checks.core` for how to write one.
"""

from .core import (  # noqa: F401
    HISTORY,
    REGISTRY,
    Guard,
    Hint,
    Verdict,
    answer_source,
    calls,
    history_as_dict,
    package_use,
    register,
)
from .numbering import exercise_name, exercise_number  # noqa: F401
