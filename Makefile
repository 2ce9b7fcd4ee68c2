# Onyx: `make run` (demo) and `make test` (whole suite) do all the set-up themselves.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
MVN    := mvn -q -B -s deploy/jvm/settings.xml -f deploy/jvm/pom.xml
PYTEST_ARGS ?=

.PHONY: setup venv jvm run test bench clean check-tools

setup: venv jvm

check-tools:
	@deploy/check-tools.sh

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml | check-tools
	@echo "==> creating $(VENV) and installing Onyx (first time: a few minutes, PySpark is large)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip
	@$(PY) -m pip install -q -e '.[test,bench]'
	@touch $@

jvm: deploy/jvm/lib/.fetched
deploy/jvm/lib/.fetched: deploy/jvm/pom.xml deploy/jvm/kafka/pom.xml deploy/jvm/spark-kafka/pom.xml | check-tools
	@echo "==> fetching the Kafka broker and Spark's Kafka connector from Maven Central into deploy/jvm/lib/"
	@rm -rf deploy/jvm/lib
	@$(MVN) package
	@rm -rf deploy/jvm/target deploy/jvm/*/target
	@touch $@

run: setup
	@$(VENV)/bin/onyx demo

# pytest exits 5 when it collected no test: for this suite that means tests went
# missing, so it is reported as a failure rather than passed off as green.
test: setup
	@$(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: pytest collected no tests (exit 5); the suite is missing" >&2; fi; \
	exit $$rc

clean:
	rm -rf .run deploy/jvm/lib deploy/jvm/target deploy/jvm/*/target
