"""Instructor kit: the student release and the autograder, both read from the chapter notebooks.

=================  ==============================================================================
module             what it holds
=================  ==============================================================================
``markup``         reads the exercise markup of a chapter (``{exercise}``, ``solution`` cells,
                   ``# BEGIN SOLUTION`` / ``# END SOLUTION``) and turns MyST into plain Markdown
``course``         the course as the tools see it: chapters from ``_toc.yml``, points, hidden tests
``release``        ``attention-book release``: student notebooks without solutions, README, zip
``grade``          ``attention-book grade``: the order of the steps below, records, the folder
``submissions``    reading the submissions folder: file names, skipped files, chapter recognised
``planning``       the cells that run: the release's cells + the student's answers; tamper flags
``sandbox``        isolation of a kernel: bubblewrap, its own user id and cgroup; the allowed environment
``sandbox_init``   the sandbox's first process: a size-limited tmpfs, limits, no privileges, the kernel
``runner``         running a notebook in the sandbox and asking its kernel for values (bounded, with deadlines)
``worker``         each submission read in a memory-limited worker process, killed at its hard deadline
``wire``           the data format of requests and replies, read back under bounds
``kernel_side``    the code the grader calls inside a submission's kernel (a fixed request vocabulary)
``probes``         the public procedures hidden tests may ask a kernel to run (inputs only, never code)
``own_work``       what each chapter's body defines before each exercise ("write your own")
``hidden``         the ``@hidden_test`` format and sessions (``remote``: tests of ``ns``)
``references``     the chapter's own notebook run first: reference values, the tests run
``scoring``        points from test results with the grader's weights, clamped
``report``         ``grades.csv`` and ``summary.md``, escaped
=================  ==============================================================================

Command line: ``attention-book release`` / ``attention-book grade FOLDER`` /
``attention-book exercises`` (see ``attention_book.cli``).
"""
