# The two entry points are `make run` and `make test`; `make quick` is the
# inner loop and `make bench` an extra; everything else is a building block
# of those.
SHELL := /usr/bin/env bash
GO ?= go
KUBE_VERSION ?= v1.37.1
export MCM_TESTENV_DIR ?= $(HOME)/.cache/mcm/testenv/$(KUBE_VERSION)
# Integration tests start a control plane per package; allow for a slow,
# loaded two-core machine.
TEST_TIMEOUT ?= 30m
# Tests run with client-go's cache mutation detector: an informer whose
# cached object was changed in place crashes the test that owns it. Cached
# objects share strings, maps and owner references with each other
# (internal/cachetransform), so a write to one would show on many.
TEST_ENV := KUBE_CACHE_MUTATION_DETECTOR=true

.PHONY: all run test testenv fmt-check vet verify-codegen generate check-deps check-layers check-size quick bench e2e

all: test

## run: the whole machine lifecycle on a local control plane (reference/demo):
## builds the test environment once (cached), starts a cluster in a temp dir,
## runs the reference manager with --driver=sim and shows the machines'
## progress until Ctrl-C. ARGS take the demo's and the manager's flags, e.g.
## ARGS="--control-kubeconfig ~/.kube/config" or ARGS=--exit-when-running.
run:
	$(GO) build -o _output/bin/mcm-demo ./reference/demo
	./_output/bin/mcm-demo $(ARGS)

## test: everything CI checks, on a cold machine included (hack/test.sh):
## formatting, vet, codegen, dependency, layer and size checks in one lane;
## the control plane, the root module's tests (slowest packages first), the
## nested modules' tests and MCM's own suite (e2e) in another beside it; a
## table of seconds per step and the ten slowest packages at the end.
test:
	$(TEST_ENV) GO=$(GO) TEST_TIMEOUT=$(TEST_TIMEOUT) ./hack/test.sh

## quick: the inner loop, no control plane: every unit, golden and property
## test of the root module and the nested modules that have tests, with the
## race and cache mutation detectors; integration tests skip (-short).
## Results of unchanged packages come from Go's test cache.
quick:
	$(TEST_ENV) $(GO) test -race -short ./...
	cd driver/mcmdriver && $(TEST_ENV) $(GO) test -race -short ./...
	cd examples/mcmprovider && $(TEST_ENV) $(GO) test -race -short ./...

## testenv: build (once, cached) etcd and the Kubernetes control-plane binaries.
testenv:
	./hack/testenv.sh

fmt-check:
	@out="$$(gofmt -s -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './_output/*'))"; \
	if [[ -n "$$out" ]]; then echo "gofmt -s needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	cd bench && $(GO) vet ./...
	cd e2e/mcmsuite && $(GO) vet ./...
	cd e2e/mcmsuite/run && $(GO) vet ./...
	cd driver/mcmdriver && $(GO) vet ./...
	cd examples/mcmprovider && $(GO) vet ./...

generate:
	./hack/update-codegen.sh

verify-codegen:
	./hack/verify-codegen.sh

## check-deps: a module that imports mcm must not pull in forbidden modules.
check-deps:
	./hack/check-deps.sh

## check-layers: no binary links package testing, only tests import test
## support, and internal/ imports nothing above it (internal/README.md).
check-layers:
	./hack/check-layers.sh

## check-size: no non-test, non-generated Go file over 500 lines and no
## function over 80 lines without a "// Long: <reason>" line right above it
## (CONTRIBUTING.md).
check-size:
	$(GO) run ./hack/sizecheck

## bench: mcm's drain and kubectl's on the same workloads against the test
## environment: 200 pods on one node, and a mixed node behind a
## PodDisruptionBudget; the MachineSet controller's API writes per machine
## created, and both set controllers' writes per machine of a rollout; then
## one reference manager with the simulated cloud scaled to 5000 machines
## (bench/simscale: time to Running, peak RSS, API requests, node flaps;
## MCM_BENCH_SIM_MACHINES and MCM_BENCH_SIM_STABLE change the scale and the
## stable period); last, the same scenarios against Gardener MCM v0.62.1
## (built from the Go module proxy) and against the reference manager, each
## on a fresh control plane, printed as one table with progress lines while
## it runs, creation under both boot models (VMs up and joined when the
## cloud call returns, and VMs joining 0-3 s later) with the ratios for
## each (bench/compare; bench/README.md says how to read it, and
## MCM_BENCH_SCENARIOS picks scenarios and sizes). The library's own
## benchmarks include the cost of one unrelated machine event in a settled
## deployment of 10 000 machines (BenchmarkSettledMachineEvent). The simscale run takes
## about seven minutes on two cores, the comparison's defaults well over an
## hour.
bench: testenv
	$(GO) test -run '^$$' -bench . -benchtime 3x ./drain/ ./machineset/ ./deployment/
	cd bench && $(GO) test -run '^$$' -bench . -benchtime 3x ./kubectldrain/
	cd bench && $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./simscale/
	cd bench && $(GO) test -run '^$$' -bench '^BenchmarkCompare$$' -benchtime 1x -timeout 8h ./compare/

## e2e: Gardener MCM v0.62.1's own integration suite (its
## pkg/test/integration/common, from the Go module proxy) against the
## reference binary, started as MCM's two processes through the suite's
## `make start` hooks, on a local control plane with the simulated cloud;
## a table of the specs' results at the end (e2e/mcmsuite/README.md).
## Part of test: about a minute and a half warm, about 15 minutes with
## empty Go caches, five minutes more for each wait a failing spec times
## out.
e2e: testenv
	$(MAKE) -C e2e/mcmsuite test-integration
