# The two commands of the README's quick start are `make demo` and `make test`; both install
# everything first (idempotently, see deploy/install.sh). Other targets are for development.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# Per-test timeout: a hung broker or agent fails its test instead of the whole run.
PYTEST_TIMEOUT ?= 300
# Test processes: two by default (a whole file per process, each with its own local
# environment): about 27 min on the 2-core machine instead of about 55 with one, which is over
# the run's budget. PYTEST_WORKERS=0 runs everything in one process.
PYTEST_WORKERS ?= 2
PYTEST_PARALLEL := $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile)

.PHONY: setup demo demo-secure test lint unit integration test-secured test-spark-standalone \
	chaos-secured down clean

setup:
	bash deploy/install.sh

demo: setup
	$(VENV)/bin/drsvc demo

# The same drill on a secured environment (SASL_SSL, ACLs, Consul ACLs, the API over HTTPS), each
# role under its own principal; its own environment in .drsvc/demo-secure.
demo-secure: setup
	$(VENV)/bin/drsvc demo --secure

# How long a local broker may take to start in the tests: the run holds a dozen brokers and
# Spark on two cores, and a broker restarted mid-test has needed more than the 90 s default.
TEST_START_TIMEOUT_S ?= 180

# pytest exits 5 when it collected no test: that is a failure here, never a pass.
test: setup
	$(MAKE) --no-print-directory lint
	DRSVC_START_TIMEOUT_S=$(TEST_START_TIMEOUT_S) $(PY) -m pytest $(PYTEST_PARALLEL) --timeout=$(PYTEST_TIMEOUT) --durations=25 -m "not secured_matrix and not spark_standalone" tests; status=$$?; \
	if [ $$status -eq 5 ]; then echo "test: pytest collected no tests" >&2; exit 1; fi; \
	exit $$status

lint:
	$(VENV)/bin/ruff check drsvc failover chaos tests bench examples
	$(VENV)/bin/ruff format --check drsvc failover chaos tests bench examples
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

unit:
	$(PY) -m pytest --timeout=60 tests/unit

integration:
	$(PY) -m pytest $(PYTEST_PARALLEL) --timeout=$(PYTEST_TIMEOUT) tests/integration

# The integration tests on secured clusters (SASL_SSL, ACLs, secured Consul): every file named
# so, those that exist, and drsvc verify's secured case. make test runs them too but for those
# marked secured_matrix (ACL sync, drsvc verify's secured case, the secured demo): CI's time goes
# to the secured core paths, the secured drill and the secret search.
SECURED_TESTS := $(wildcard tests/integration/test_secured_*.py tests/integration/test_chaos_secured.py \
	tests/integration/test_acl_sync.py tests/integration/test_secret_hygiene.py) \
	tests/integration/test_verify.py::test_verify_reads_a_secured_cluster_as_the_verifier \
	tests/integration/test_demo.py::test_the_secured_demo_drill_passes_and_shows_no_secret

test-secured: setup
	DRSVC_START_TIMEOUT_S=$(TEST_START_TIMEOUT_S) $(PY) -m pytest $(PYTEST_PARALLEL) --timeout=$(PYTEST_TIMEOUT) --durations=10 $(SECURED_TESTS)

# drsvc verify on a standalone Spark cluster (a master and two workers from PySpark's own scripts),
# as `drsvc verify --master spark://...` and as spark-submit's application: 14 min on the 2-core
# machine under a load average of about 20, so not in make test (nor CI); see docs/chaos.md.
test-spark-standalone: setup
	DRSVC_START_TIMEOUT_S=$(TEST_START_TIMEOUT_S) $(PY) -m pytest --timeout=1200 --durations=5 -m spark_standalone tests/integration/test_verify_standalone.py

# The whole chaos suite on secured clusters (not in CI, which runs one secured scenario): its
# own environment in .drsvc/chaos-secured-env, reports under .drsvc/chaos/<time>.
chaos-secured: setup
	DRSVC_START_TIMEOUT_S=$(TEST_START_TIMEOUT_S) $(VENV)/bin/drsvc chaos suite --secure

# the demo's environments live in .drsvc/demo and .drsvc/demo-secure, the development one in .drsvc
down:
	$(VENV)/bin/drsvc dev down --state-dir .drsvc/demo
	$(VENV)/bin/drsvc dev down --state-dir .drsvc/demo-secure
	$(VENV)/bin/drsvc dev down

clean: down
	rm -rf .drsvc
