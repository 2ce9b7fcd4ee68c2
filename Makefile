# Onyx: `make run` (demo) and `make test` (whole suite) do all the set-up themselves.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
MVN    := mvn -q -B -s deploy/jvm/settings.xml -f deploy/jvm/pom.xml
PYTEST_ARGS ?=

# Kubernetes validation toolbox (deploy/k8s/): pinned tools and schemas, all from package
# registries, kept in .tools/ (git-ignored) behind stamp files named after the versions.
HELM_VERSION        ?= v4.3.1
KUBECONFORM_VERSION ?= v0.8.0
STRIMZI_VERSION     ?= 1.2.0
K8S_VERSIONS        ?= 1.30.0 1.37.0
empty :=
space := $(empty) $(empty)
TOOLS_STAMP   := .tools/stamps/helm-$(HELM_VERSION)_kubeconform-$(KUBECONFORM_VERSION)
SCHEMAS_STAMP := .tools/stamps/schemas_strimzi-$(STRIMZI_VERSION)_k8s-$(subst $(space),-,$(K8S_VERSIONS))

.PHONY: setup venv jvm run test fuzz bench clean check-tools k8s-tools k8s-schemas k8s-validate image kcat chromium

setup: venv jvm

check-tools:
	@deploy/check-tools.sh

# setup.py and yfilter/csrc/: the C matcher, compiled by the editable install.
venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml setup.py $(wildcard yfilter/csrc/*.c yfilter/csrc/*.h) | check-tools
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

# helm and kubeconform, built from source with `go install` (first time: a few minutes).
k8s-tools: $(TOOLS_STAMP)
$(TOOLS_STAMP): deploy/k8s/install-tools.sh
	@HELM_VERSION=$(HELM_VERSION) KUBECONFORM_VERSION=$(KUBECONFORM_VERSION) deploy/k8s/install-tools.sh
	@mkdir -p $(@D) && touch $@

# Kubernetes, Strimzi and Spark Operator JSON schemas (first time: about a minute).
k8s-schemas: $(SCHEMAS_STAMP)
$(SCHEMAS_STAMP): deploy/k8s/fetch-schemas.sh deploy/k8s/requirements.txt deploy/k8s/strimzi/pom.xml \
                  deploy/k8s/k8s_schemas.py deploy/k8s/crd_schemas.py | check-tools
	@K8S_VERSIONS="$(K8S_VERSIONS)" STRIMZI_VERSION=$(STRIMZI_VERSION) PYTHON=$(PYTHON) deploy/k8s/fetch-schemas.sh
	@mkdir -p $(@D) && touch $@

# helm lint + helm template + kubeconform -strict, for the default values and a 20-broker overlay.
k8s-validate: venv k8s-tools k8s-schemas
	@echo "==> validating the Helm chart (deploy/helm/onyx) for Kubernetes $(K8S_VERSIONS)"
	@K8S_VERSIONS="$(K8S_VERSIONS)" deploy/k8s/validate.sh

# The container image (needs docker or podman and the jars of `make jvm`).
image: jvm
	@deploy/image/build.sh

# pytest exits 5 when it collected no test: for this suite that means tests went
# missing, so it is reported as a failure rather than passed off as green.
# kcat (Debian's package) for the test that publishes with a Kafka client we did not write.
kcat:
	@deploy/install-deb.sh kcat "the end-to-end test with a Kafka client we did not write"

# Chromium (Debian's package) for the console's test in a real headless browser.
chromium:
	@deploy/install-deb.sh chromium "the console's headless browser test"

test: setup k8s-validate kcat chromium
	@$(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: pytest collected no tests (exit 5); the suite is missing" >&2; fi; \
	exit $$rc

# Coverage-guided fuzzing (tests/fuzz): each target for FUZZ_SECONDS, one after the
# other; inputs that add coverage are merged into tests/fuzz/corpus/ (commit them),
# crashes land in .run/fuzz/artifacts/ (so does an input whose parse in the schema or
# profile target takes over FUZZ_CPU_LIMIT_MS of CPU). FUZZ_ASAN=1 runs the C matcher
# built with AddressSanitizer and UBSan. `make test` runs a short seeded round.
FUZZ_SECONDS      ?= 300
FUZZ_ASAN         ?=
FUZZ_CPU_LIMIT_MS ?= 100
fuzz: venv
	@$(PY) -m tests.fuzz --max-time $(FUZZ_SECONDS) --grow --cpu-limit-ms $(FUZZ_CPU_LIMIT_MS) $(if $(FUZZ_ASAN),--asan)

clean:
	rm -rf .run deploy/jvm/lib deploy/jvm/target deploy/jvm/*/target
