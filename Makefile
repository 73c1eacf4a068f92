# ZCube testbed.  Two commands do everything on a fresh Debian/Ubuntu machine (as root):
#   make demo   install what is missing, then run the default ZCube-versus-ROFT comparison
#   make test   install what is missing, then run every test (unit + integration)
SHELL := /bin/bash
PYTHON ?= /usr/bin/python3
VENV := .venv
BIN := $(VENV)/bin
# System packages: Open vSwitch and Mininet for the emulation, traffic and capture tools.
APT_PACKAGES := openvswitch-switch mininet iperf3 iputils-ping tcpdump tshark ethtool iproute2 \
                nftables procps python3-venv python3-pip libjemalloc2
# Chromium, for the live view's browser test only: Debian's package; where apt has none
# (Ubuntu ships it as a snap) the test is skipped and nothing else changes.
APT_OPTIONAL := chromium

.PHONY: setup demo test unit integration bench help
help:
	@echo "make demo | make test | make setup | make unit | make integration | make bench"

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	@missing=$$(for p in $(APT_PACKAGES); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; \
	  done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "make setup: need root to install:" $$missing >&2; exit 1; fi; \
	  echo "installing system packages:" $$missing; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends $$missing >/dev/null; \
	fi
	@for p in $(APT_OPTIONAL); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' && continue; \
	  [ "$$(id -u)" = 0 ] || { echo "make setup: $$p not installed (needs root); its tests skip"; continue; }; \
	  { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$p \
	      >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && \
	      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$p \
	      >/dev/null 2>&1; }; } || echo "make setup: apt has no $$p here; the tests that need it skip"; \
	done
	@test -x $(BIN)/python || $(PYTHON) -m venv --system-site-packages $(VENV)
	@echo "installing the testbed and its Python packages into $(VENV)"
	@$(BIN)/pip install -q --disable-pip-version-check -e '.[test]'
	@# OpenFlow controller frameworks: Ryu 4.34 (needs pbr at build time) and os-ken
	@$(BIN)/pip install -q --disable-pip-version-check pbr wheel
	@$(BIN)/pip install -q --disable-pip-version-check --no-build-isolation ryu==4.34
	@$(BIN)/pip install -q --disable-pip-version-check os-ken
	@touch $@

demo: setup
	$(BIN)/zcube demo

# the integration tests one at a time (they share the machine's cores with the emulator),
# then the unit tests on two workers; both run even when the first fails
test: setup
	@rc=0; $(BIN)/python -m pytest -q -rs -p no:cacheprovider tests/integration || rc=$$?; \
	$(BIN)/python -m pytest -q -rs -p no:cacheprovider -n 2 tests/unit || rc=$$?; exit $$rc

unit: setup
	$(BIN)/python -m pytest -q -rs -p no:cacheprovider -n 2 tests/unit

integration: setup
	$(BIN)/python -m pytest -q -rs -p no:cacheprovider -m integration

# every benchmark in its quick size, each under a time limit (benchmarks/README.md); as root
# for the emulation's (the others run anyway, and those say they were skipped)
bench: setup
	$(BIN)/python -m benchmarks
