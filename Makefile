# kreassign: `make demo` and `make test` set everything up in .venv on first use.
PYTHON ?= python3
# The Apache Kafka releases the live tests run on (the first: every live test; the others: the
# compatibility tests), fetched from Maven Central by `make kafka`. Empty: the tested matrix
# (`MATRIX` in sandbox/kafka_engine/dist.py), e.g. KAFKA_VERSIONS="3.9.2" to run on 3.9 alone.
# ENGINE=kafka runs the demo on real Kafka brokers instead of the emulator.
KAFKA_VERSIONS ?=
ENGINE ?= emulator
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast kafka bench man lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,plots,connect]'
	touch $(STAMP)

demo: $(STAMP) $(if $(filter kafka,$(ENGINE)),kafka)
	PATH="$(CURDIR)/$(BIN):$$PATH" ENGINE=$(ENGINE) bash demo/run.sh

# Kafka's runtime jars (broker, tools, logging binding) by the pom in sandbox/kafka_engine, the
# Prometheus JMX exporter's agent, and kreassign's KIP-714 client-telemetry receiver compiled by
# sandbox/kafka_engine/telemetry/pom.xml, into ~/.cache/kreassign/kafka (outside git); needs Java
# and Maven, and says so when they are missing.
kafka: $(STAMP)
	$(BIN)/kreassign sandbox fetch-kafka $(foreach v,$(KAFKA_VERSIONS),--kafka-version $(v))

# Two workers: the real-Kafka tests in order on one, the Spark tests in order on the other, the
# rest on both (tests/conftest.py says why); then, alone on the machine, the tests that measure latency, copy
# rates or completion times (marked `timing`: a busy second worker is load they would measure).
# Both parts always run; the target fails if either did.
PYTEST := $(if $(KAFKA_VERSIONS),KREASSIGN_KAFKA_VERSIONS="$(KAFKA_VERSIONS)") PYSPARK_PYTHON=$(CURDIR)/$(BIN)/python \
	$(BIN)/python -m pytest -q -p no:cacheprovider
test: $(STAMP) kafka
	status=0; \
	$(PYTEST) -n 2 --dist loadgroup -m "not timing" || status=$$?; \
	$(PYTEST) -m timing || status=$$?; \
	exit $$status

# No Spark, no slow tests, and the live tests on the emulator only (no JVM at all).
test-fast: $(STAMP)
	KREASSIGN_LIVE_ENGINES=emulator $(BIN)/python -m pytest -q -p no:cacheprovider -m "not spark and not slow and not kafka"

bench: $(STAMP)
	PYSPARK_PYTHON=$(CURDIR)/$(BIN)/python $(BIN)/python -m bench.run_all

man: $(STAMP)
	$(BIN)/python -m kreassign.cli.manpages man

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis spark-warehouse
