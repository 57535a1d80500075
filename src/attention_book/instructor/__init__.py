"""Instructor kit: the student release and the autograder, both read from the chapter notebooks.

=================  ==============================================================================
module             what it holds
=================  ==============================================================================
``markup``         reads the exercise markup of a chapter (``{exercise}``, ``solution`` cells,
                   ``# BEGIN SOLUTION`` / ``# END SOLUTION``) and turns MyST into plain Markdown
``course``         the course as the tools see it: chapters from ``_toc.yml``, points, hidden tests
``release``        ``attention-book release``: student notebooks without solutions, README, zip
``grade``          ``attention-book grade``: runs submissions, writes ``grades.csv`` + ``summary.md``
``hidden``         the ``@hidden_test`` decorator instructors use in ``instructor/hidden_tests/``
``kernel_side``    the code the autograder runs inside a submission's kernel
=================  ==============================================================================

Command line: ``attention-book release`` / ``attention-book grade FOLDER`` /
``attention-book exercises`` (see ``attention_book.cli``).
"""
