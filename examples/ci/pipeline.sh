#!/usr/bin/env bash
# The steps of a CI job that tests a fabric's routing end to end, as root on a fresh Debian
# or Ubuntu machine, from the repository's root: install, a scenario with expectations, and
# your own pytest tests with the testbed's plugin. JUnit files for the CI system go to DIR.
# Usage: examples/ci/pipeline.sh [DIR]   (default results/ci); exit status: the first failing
# step's (docs/reference.md, "Exit status").
set -euo pipefail
out=${1:-results/ci}
mkdir -p "$out"

make setup

# a scenario whose expectations set the exit status: 3 one failed, 4 one could not be judged
.venv/bin/zcube run examples/ci/checks.yaml -o "$out/checks" --no-report \
    --junit-xml "$out/checks.xml"

# your own end-to-end tests: the plugin's zcube_fabric brings each fabric up and down
.venv/bin/python -m pytest -q -p no:cacheprovider examples/test_my_fabric.py \
    --junit-xml "$out/pytest.xml"
