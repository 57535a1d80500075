# Entry points of the course. Every target sets itself up (tools/setup.sh) on a fresh clone.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
BUILD := _build

# tiktoken downloads the GPT-2 BPE files on first use; offline machines use the shared cache.
ifneq ($(wildcard ../shared/tiktoken-cache/README.md),)
export TIKTOKEN_CACHE_DIR ?= $(abspath ../shared/tiktoken-cache)
endif
# Tells the explorers to add their kernel-free HTML fallback (see attention_book.explorers).
BOOK_ENV := ATTENTION_BOOK_STATIC=1

.PHONY: help setup book serve lab lab-authors test test-fast test-compat bench release grade gradescope clean strip

# JupyterLab for readers: its own environment with only what readers install (requirements.txt,
# tools/lab_setup.sh; PyTorch is shared with .venv, one copy in .cache/torch/), opened on the
# learner's own copies of the student notebooks, my-notebooks/ (tools/working_copy.py copies each
# chapter from student/notebooks/ once and never overwrites it; student/ stays as generated).
# Jupyter refuses to start as root unless told, so --allow-root is added only when we are root.
# LAB_ARGS passes more options (e.g. LAB_ARGS="--no-browser --port 8890"). The environment lives in
# .cache/, which git and the book build ignore (a venv elsewhere in the repository would be read
# as pages of the book); my-notebooks/ is ignored by git too.
LAB_VENV ?= .cache/lab-venv
LAB_DIR ?= my-notebooks
LAB_ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
lab_command = $(LAB_VENV)/bin/jupyter lab $(LAB_ROOT_FLAG) --ServerApp.root_dir=$(abspath $(1)) $(LAB_ARGS)
# make serve listens on this machine only; HOST=0.0.0.0 shares the site with your network.
HOST ?= 127.0.0.1
PORT ?= 8000

help:
	@echo "make book     build the site into $(BUILD)/html (notebooks executed)"
	@echo "make serve    serve the built site on http://localhost:$(PORT) (HOST=0.0.0.0 to share it on your network)"
	@echo "make lab      open JupyterLab on your copies of the student notebooks ($(LAB_DIR)/, no solutions)"
	@echo "make lab-authors   open JupyterLab on the chapters with their solutions (notebooks/)"
	@echo "make test     run the whole test suite (sets up venv, Chromium, MathJax copy)"
	@echo "make test-fast     unit tests only (no notebooks, book or browser): under a minute"
	@echo "make test-compat   every chapter and the unit tests on the lowest and the newest PyTorch readers may have"
	@echo "make bench    measure build/notebook/explorer/training speed, tables in $(BUILD)/bench"
	@echo "make release  student release (no solutions) in $(BUILD)/release"
	@echo "make grade SUBMISSIONS=folder CHAPTER=03   grade submitted notebooks into $(BUILD)/grades/ch03"
	@echo "make gradescope CHAPTER=03   the autograder of chapter 3 as a Gradescope zip in $(BUILD)/gradescope"
	@echo "make strip    store the chapter notebooks without outputs"

setup:
	@tools/setup.sh

book: setup
	$(BOOK_ENV) $(VENV)/bin/jupyter-book build . --path-output . -W -n --keep-going
	@echo "Built site: $(abspath $(BUILD))/html/index.html"

serve:
	@test -f $(BUILD)/html/index.html || $(MAKE) book
	@echo "Serving $(BUILD)/html on http://$(if $(filter 0.0.0.0,$(HOST)),localhost,$(HOST)):$(PORT)/ (Ctrl+C stops)"
	$(PY) -m http.server $(PORT) --bind $(HOST) --directory $(BUILD)/html

lab:
	@VENV=$(LAB_VENV) tools/lab_setup.sh
	@$(LAB_VENV)/bin/python tools/working_copy.py $(LAB_DIR)
	$(call lab_command,$(LAB_DIR))

lab-authors:
	@VENV=$(LAB_VENV) tools/lab_setup.sh
	$(call lab_command,notebooks)

# Three workers (pytest-xdist), even on two cores: the book build, the graders and the notebook runs
# overlap instead of waiting for each other (much of their time is waiting for kernels and
# sandboxes); tests/conftest.py gives the tests that share a fixture to one worker.
TEST_WORKERS ?= 3
test:
	@tools/setup.sh --browser
	$(PY) -m pytest -p no:cacheprovider -q -ra -n $(TEST_WORKERS) $(PYTEST_ARGS)

# Unit tests only (no notebooks, no book, no browser): under a minute on two cores, on two
# pytest-xdist workers (collecting the suite alone takes a worker about 12 s), each computing on one
# thread: the tensors are tiny, and PyTorch's OpenMP threads spin when the cores are busy with other
# programs (test_hello_world.py took 7.7 min with two threads on a loaded 2-core machine, 62 s with one).
TEST_FAST_WORKERS ?= 2
test-fast: setup
	OMP_NUM_THREADS=1 $(PY) -m pytest -p no:cacheprovider -q -m "not slow and not browser" -n $(TEST_FAST_WORKERS) $(PYTEST_ARGS)

# The readers' PyTorch range (requirements.txt: torch>=2.5) at both ends: every chapter (run twice,
# as in make test), the quoted numbers and the unit tests, on the lowest release the range allows
# and on the newest pip can install, each in its own environment under .cache/compat/ (PyTorch in
# .cache/torch/, reused by later runs). tools/compat.sh says what it runs and skips and why, and
# how long it takes: GitHub's workflow runs it (one job per end), .ci/run does not.
COMPAT_TORCH ?= floor newest
test-compat: setup
	@tools/compat.sh $(COMPAT_TORCH)

bench:
	@tools/setup.sh --browser
	$(PY) tools/bench.py $(BENCH_ARGS)

release: setup
	$(VENV)/bin/attention-book release --out $(BUILD)/release

# Each chapter grades into its own folder, $(BUILD)/grades/chNN (OUT=... overrides); STUDENT=name
# regrades one student, MANUAL=file.csv gives the points of the written exercises.
grade: setup
	@test -n "$(SUBMISSIONS)" -a -n "$(CHAPTER)" || { echo "usage: make grade SUBMISSIONS=path/to/folder CHAPTER=03 [STUDENT=name] [MANUAL=points.csv] [OUT=folder]"; exit 2; }
	$(VENV)/bin/attention-book grade "$(SUBMISSIONS)" --chapter "$(CHAPTER)" $(if $(OUT),--out "$(OUT)") \
		$(if $(STUDENT),--student "$(STUDENT)") $(if $(MANUAL),--manual "$(MANUAL)") $(GRADE_ARGS)

gradescope: setup
	@test -n "$(CHAPTER)" || { echo "usage: make gradescope CHAPTER=03"; exit 2; }
	$(VENV)/bin/attention-book gradescope --chapter "$(CHAPTER)" --out $(BUILD)/gradescope $(GRADESCOPE_ARGS)

# Remove outputs from the chapter notebooks in place (they are stored without outputs; the
# learner's my-notebooks/ and the generated student/ are not touched).
strip: setup
	$(PY) tools/strip_outputs.py notebooks/*.ipynb

clean:
	rm -rf $(BUILD)
