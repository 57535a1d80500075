"""Instructor kit: the student release and the autograder, both read from the chapter notebooks.

=====================  ==============================================================================
module                 what it holds
=====================  ==============================================================================
``markup``             reads the exercise markup of a chapter (``{exercise}``, ``solution`` cells,
                       ``# BEGIN SOLUTION`` / ``# END SOLUTION``) and turns MyST into plain Markdown
``course``             the course as the tools see it: chapters from ``_toc.yml``, points, hidden tests
``release``            ``attention-book release``: student notebooks without solutions, README, zip
``grade``              ``attention-book grade``: the order of the steps below, records, the folder
``submissions``        reading the submissions folder: file names, skipped files, chapter recognised
``planning``           the cells that run: the release's cells + the student's answers; tamper flags
``sandbox``            isolation of a kernel: bubblewrap, its own user id and cgroup; the environment
``sandbox_init``       the sandbox's first process: a size-limited tmpfs, limits, no privileges
``runner``             running a notebook in the sandbox and asking its kernel for values (bounded)
``worker``             each submission read in a memory-limited worker, killed at its hard deadline
``wire``               the data format of requests and replies, read back under bounds
``kernel_side``        the code the grader calls inside a kernel (a fixed request vocabulary)
``probes``             the public procedures hidden tests may ask a kernel to run (inputs, no code)
``own_work``           what each chapter's body defines before each exercise ("write your own")
``clean_room``         the own-work run: answers again in a fresh sandbox with the student's cells only,
                       rule-governed calls replayed by the grader (``checks.opgraph``), stubs score 0
``hidden``             the ``@hidden_test`` format and sessions (``remote``: tests of ``ns``)
``references``         the chapter's own notebook run first: reference values, the tests run
``scoring``            points from test results with the grader's weights, clamped
``report``             ``grades.csv`` and ``summary.md``, escaped; files written 0644
``reference_cache``    the reference values kept between runs, keyed by everything they depend on
``gradebook``          ``gradebook.csv`` (+ Canvas layout) and the manual points of written exercises
``feedback``           ``feedback/<student>.md`` and ``written/<label>.md``
``gradescope``         ``attention-book gradescope``: the grader as a Gradescope autograder zip
=====================  ==============================================================================

Command line: ``attention-book release`` / ``attention-book grade FOLDER --chapter NN`` /
``attention-book gradescope --chapter NN`` / ``attention-book exercises`` (see ``attention_book.cli``).
"""
