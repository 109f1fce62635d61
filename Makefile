# The two commands of the README: `make demo` and `make test`. Both set everything up first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test test-cluster test-versions lint unit broker-start broker-stop registry-start registry-stop bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

demo: setup
	$(BIN)/python -m integration.demo

lint: setup
	$(BIN)/ruff check connector tests integration
	$(BIN)/ruff format --check connector tests integration
	$(BIN)/mypy

# The whole suite: lint, unit tests, and integration tests against a real Kafka broker that the
# pytest session starts (fetching Kafka from Maven Central the first time) and stops. Three
# workers on the two cores: the integration tests that compute run one after another on one,
# while the unit tests and the integration tests that mostly wait share the other two
# (tests/conftest.py).
test: lint
	$(BIN)/python -m pytest -n 3 -m "not cluster"

# watukuy on a three-node Kafka cluster it starts itself (integration/kafka/cluster.py); not
# part of `make test`, which must stay within CI's time.
test-cluster: setup
	$(BIN)/python -m pytest -m cluster

# The integration tier and the fault suite's short profile on each Kafka release of the matrix
# (the oldest supported line and the default; VERSIONS=3.9.1,4.4.0 picks others), each on a
# broker of its own, one after the other (integration/kafka/matrix.py). Not part of `make test`.
test-versions: setup
	$(BIN)/python -m integration.kafka.matrix $(if $(VERSIONS),--versions $(VERSIONS))

unit: setup
	$(BIN)/python -m pytest -m unit

broker-start: setup
	$(BIN)/python -m integration.kafka.broker start

broker-stop: setup
	$(BIN)/python -m integration.kafka.broker stop

registry-start: setup
	$(BIN)/python -m integration.registry start

registry-stop: setup
	$(BIN)/python -m integration.registry stop

clean:
	rm -rf $(VENV) .watukuy .pytest_cache .mypy_cache .ruff_cache
