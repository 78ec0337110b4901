# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install demo test test-min bench docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch first, pinned: on these machines torch==2.13.0 is a local CPU build, while an
# unpinned torch would pull a multi-GB CUDA build. The package declares the range torch>=2.2.
# Every other dependency is installed at its declared floor's release line (name==floor.*,
# tools/min_requirements.py --constraints): the floors pyproject.toml declares are the versions
# every `make test` (and so CI) installs and tests.
EXTRAS := test bench eval webdataset ray config fast docs lightning volumes
$(STAMP): pyproject.toml tools/min_requirements.py | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(PYTHON) tools/min_requirements.py --constraints $(EXTRAS) > $(VENV)/floors.txt
	$(BIN)/python -m pip install -q -c $(VENV)/floors.txt -e '.[test,bench,eval,webdataset,ray,config,fast,docs,lightning,volumes]'
	$(BIN)/python -m pip install -q --no-deps torchxrayvision==1.5.7
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/python -m radharmony.demo

# The viewer's browser test drives Debian's chromium through chromium-driver (CI runs as root).
test: install
	command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		($(SUDO) apt-get update && $(SUDO) apt-get install -y chromium chromium-driver)
	$(BIN)/python -m pytest -q

# Every declared floor, installed and tested: a fresh venv with each dependency pinned to the
# floor pyproject.toml declares (torch: the local CPU build 2.13.0, as make install), then the suite.
MIN_VENV := .venv-min
test-min:
	$(PYTHON) -m venv $(MIN_VENV)
	$(MIN_VENV)/bin/python -m pip install -q --upgrade pip
	$(PYTHON) tools/min_requirements.py test > $(MIN_VENV)/floors.txt
	$(MIN_VENV)/bin/python -m pip install -q torch==2.13.0
	$(MIN_VENV)/bin/python -m pip install -q -r $(MIN_VENV)/floors.txt
	$(MIN_VENV)/bin/python -m pip install -q --no-deps -e .
	$(MIN_VENV)/bin/python -m pytest -q -p no:cacheprovider --ignore=tests/tools/test_viewer.py

# The docs site (docs/, mkdocs.yml): regenerate the dataset and API pages, run every python
# example of README.md and docs/ on fake replicas, build with warnings as errors into site/.
docs: install
	$(BIN)/python -m tools.gen_docs
	$(BIN)/python -m pytest -q tests/test_docs.py tests/test_readme.py
	$(BIN)/mkdocs build --strict

bench: install
	$(BIN)/python -m benchmarks.run
	$(BIN)/python -m benchmarks.merge
	$(BIN)/python -m benchmarks.studies
	$(BIN)/python -m benchmarks.vqa
	$(BIN)/python -m benchmarks.qba
	$(BIN)/python -m benchmarks.audit
	$(BIN)/python -m benchmarks.ct_rate_table
	$(BIN)/python -m benchmarks.mixture_build
	$(BIN)/python -m benchmarks.mixture_scale
	$(BIN)/python -m benchmarks.mixture_export
	$(BIN)/python -m benchmarks.mixture_boxes
	$(BIN)/python -m benchmarks.mixture_boxes --tasks
	$(BIN)/python -m benchmarks.cli_startup
	$(BIN)/python -m benchmarks.mixture_view
	$(BIN)/python -m benchmarks.volumes_read
	$(BIN)/python -m benchmarks.volumes_cache
	$(BIN)/python -m benchmarks.dicom_scan
	$(BIN)/python -m benchmarks.dicom_scan --mr-headers
	$(BIN)/python -m benchmarks.ct_mixture
	$(BIN)/python -m benchmarks.volumes_export
	$(BIN)/python -m benchmarks.viewer_volume

clean:
	rm -rf $(VENV) $(MIN_VENV) cache demo_output .pytest_cache site
