# ferry: see README.md. Every target installs what it needs (make deps).
GO        ?= go
PKGS      := ./...
BIN       := bin
TESTFLAGS ?=
export PATH := /usr/local/go/bin:$(PATH)

# LIBFABRIC: the libfabric generation every go command here builds and
# runs against: 1.17 (the system's, by default) or 2.1 (built by make deps
# into .deps/libfabric-2.1). LIBFABRIC_PREFIX=DIR points at any other
# install instead, such as the EFA installer's /opt/amazon/efa. The binaries
# find the chosen library through their rpath: no LD_LIBRARY_PATH needed.
#   make test-faults LIBFABRIC=2.1
LIBFABRIC        ?= 1.17
LIBFABRIC2_DIR   := $(CURDIR)/.deps/libfabric-2.1
LIBFABRIC_PREFIX ?= $(if $(filter 2.1,$(LIBFABRIC)),$(LIBFABRIC2_DIR))
ifneq ($(LIBFABRIC_PREFIX),)
LIBFABRIC_LIBDIR := $(patsubst %/,%,$(dir $(firstword $(wildcard $(LIBFABRIC_PREFIX)/lib64/libfabric.so $(LIBFABRIC_PREFIX)/lib/libfabric.so) $(LIBFABRIC_PREFIX)/lib/.)))
export PKG_CONFIG_PATH := $(LIBFABRIC_LIBDIR)/pkgconfig$(if $(PKG_CONFIG_PATH),:$(PKG_CONFIG_PATH))
export CGO_LDFLAGS := -Wl,-rpath,$(LIBFABRIC_LIBDIR) $(or $(CGO_LDFLAGS),-O2 -g)
endif
# The tests check that the library loaded is the one asked for.
ifneq ($(filter 2.1,$(LIBFABRIC)),)
export FERRY_LIBFABRIC := $(LIBFABRIC)
endif

.PHONY: all deps build test demo bench lint vet fmt-check examples

all: build

deps:
	@scripts/deps.sh

build: deps
	$(GO) build $(PKGS)
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./bench/...

# test: everything that runs on a machine with no GPU and no RDMA NIC.
# The kernel compile gate runs first, verbosely, for its register tables
# (NVRTC 11.8 and 12.4) and its SASS memory-model check.
test: deps vet
	$(GO) test $(TESTFLAGS) -count=1 -v -timeout 40m -run '^TestKernelGate$$' ./tests/kernelgate
	$(GO) test $(TESTFLAGS) -count=1 -skip '^TestKernelGate$$' -timeout 20m $(PKGS)
	$(GO) test $(TESTFLAGS) -count=1 -race -timeout 20m ./fabric/... ./ipc ./tests
	$(GO) test $(TESTFLAGS) -count=1 -race -timeout 20m -run TestConformance ./efa
	CGO_ENABLED=0 $(GO) build ./...
	CGO_ENABLED=0 FERRY_TEST_REQUIRE= $(GO) test -count=1 ./efa # no cgo, no libfabric: its tests must skip cleanly

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

lint: deps fmt-check vet
	@command -v staticcheck >/dev/null 2>&1 || $(GO) install honnef.co/go/tools/cmd/staticcheck@latest
	$$($(GO) env GOPATH)/bin/staticcheck $(PKGS)

# examples: the worked programs of examples/ into $(BIN)/ (make test runs a
# small configuration of each over shm and tcp; examples/README.md).
examples: deps
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./examples/...

demo: deps
	$(GO) run ./bench/fabric-debug loopback --transport shm

bench: deps
	$(GO) test -run '^$$' -bench . -benchmem ./fabric/...

# test-libfabric2: the libfabric checks of make test again, against the
# project-built libfabric 2.1 (scripts/test-libfabric2.sh): the shim's
# generation rules, the efa package's tests (the engine conformance suite
# over shm and tcp;ofi_rxm among them), two engines in two processes,
# fabric-debug's verified loopback over both, and the a2a host backend's
# process tests over both. Skipped loudly when make deps could not build
# 2.1, a failure under FERRY_TEST_REQUIRE=libfabric2. The whole suite on
# 2.1: make test LIBFABRIC=2.1.
.PHONY: test-libfabric2 test-libfabric-subset
test-libfabric2: deps
	@scripts/test-libfabric2.sh "$(MAKE)"
test: test-libfabric2
test-libfabric-subset:
	$(GO) test $(TESTFLAGS) -count=1 ./internal/ofi
	$(GO) test $(TESTFLAGS) -count=1 -timeout 20m ./efa
	$(GO) test $(TESTFLAGS) -count=1 -timeout 10m -run 'TestTwoProcesses' ./tests
	$(GO) test $(TESTFLAGS) -count=1 -timeout 10m -run 'TestLoopbackLibfabric' ./bench/fabric-debug
	$(GO) test $(TESTFLAGS) -count=1 -timeout 10m -run 'TestHostProcesses|TestHostOverLibfabric' -short ./a2a/host
	$(GO) test $(TESTFLAGS) -count=1 -timeout 10m -run 'TestHostBackendProcesses' ./tests/a2a

# test-verbs: the verbs provider on a real verbs device, Soft-RoCE (rdma_rxe)
# in a small VM booting Debian's kernel (tests/vm/run.sh; about 9 min at load 10,
# needs root for apt-get and qemu). FERRY_SKIP_VM=1 skips it, loudly.
.PHONY: test-verbs
test-verbs: deps
	@if [ -n "$$FERRY_SKIP_VM" ]; then echo "test-verbs: SKIPPED (FERRY_SKIP_VM set): verbs provider not tested on a device"; \
	else tests/vm/run.sh; fi
test: test-verbs

# gpu-build: build the GPU test binaries here (go test -c) and gather the
# libraries they link into .gpu/ (scripts/gpu/build.sh). gpu-test: run them
# on the GPU machine from the repository root, no Go needed there
# (scripts/gpu/run.sh; prints a results table last). Without a driver the
# CUDA tests skip, unless FERRY_TEST_REQUIRE=cuda (run.sh's default).
.PHONY: gpu-build gpu-test
gpu-build:
	scripts/gpu/build.sh
gpu-test:
	scripts/gpu/run.sh

# test-faults: the fault-injection suite in full (tests/faults): two
# engines in two network namespaces joined by a user-space TUN relay, 1 GiB
# of verified writes under each impairment (loss, delay and jitter,
# reordering, duplication, corruption), a 5 s link bounce, a link down for
# good, SIGKILL of either side on tcp and shm; prints the table of fault,
# outcome, time to error and bytes verified. Needs root (make test runs a
# 16 MiB subset, and skips it loudly without root).
.PHONY: test-faults
# test-pairings: unequal NIC groups, every pairing of 1, 2 and 4 writer
# and target NICs over tcp;ofi_rxm, shm and ipc (make test runs 1 to 4 and
# 4 to 1 there, and every pairing over mem). About 15 s.
.PHONY: test-pairings
test-pairings: deps
	FERRY_TEST_PAIRINGS=all $(GO) test $(TESTFLAGS) -count=1 -timeout 10m -run '^TestPairings$$' ./efa ./ipc ./fabric/fabrictest

# test-large: 4 GiB + 1 B writes (single, paged, scatter) verified over
# mem, ipc, shm and tcp;ofi_rxm, one at a time (about 4.5 GiB of memory
# each; make test runs the mem and ipc cases); then 1 GiB + 1 B over verbs
# in the Soft-RoCE VM given 4 GiB (tests/vm, FERRY_VM_LARGE; FERRY_SKIP_VM=1
# skips it, loudly).
.PHONY: test-large
test-large: deps
	FERRY_TEST_LARGE=1 FERRY_TEST_LARGE_TRANSPORTS='mem,ipc,shm,tcp;ofi_rxm' $(GO) test $(TESTFLAGS) -count=1 -timeout 40m -v -run '^TestLargeWrites$$' ./tests
	@if [ -n "$$FERRY_SKIP_VM" ]; then echo "test-large: verbs SKIPPED (FERRY_SKIP_VM set): 1 GiB + 1 B not tested over verbs"; \
	else FERRY_VM_LARGE=1 tests/vm/run.sh; fi

# bench-regflood: what registering a large region costs the transfers of
# its group (fabric-debug flood-while-register): a flood's throughput while
# 1 GiB is registered beside it, against quiet windows, with registration
# beside the worker and on it, and registration time on 1, 2 and 4 NICs;
# tcp;ofi_rxm and shm here, then verbs in the Soft-RoCE VM (FERRY_VM_REGFLOOD,
# 4 GiB VM, beside only, base and huge pages, fresh and prefaulted:
# tests/vm/regflood.sh; FERRY_SKIP_VM=1 skips it, loudly). A few minutes
# here, 10-15 more for the VM under TCG.
.PHONY: bench-regflood
bench-regflood: deps
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./bench/fabric-debug
	@echo "host load: $$(cat /proc/loadavg)"
	$(BIN)/fabric-debug flood-while-register --transport 'tcp;ofi_rxm' --register 1G
	$(BIN)/fabric-debug flood-while-register --transport shm --register 1G
	@if [ -n "$$FERRY_SKIP_VM" ]; then echo "bench-regflood: verbs SKIPPED (FERRY_SKIP_VM set)"; \
	else FERRY_VM_REGFLOOD=1 tests/vm/run.sh && cat .vm/results/regflood.sh.txt; fi

test-faults: deps
	FERRY_FAULTS_FULL=1 $(GO) test $(TESTFLAGS) -count=1 -timeout 40m -v -run '^TestFaults$$' ./tests/faults

# fuzz: every fuzz target for FUZZTIME (default 60s) each; the exec counts
# are in the output ("fuzz: elapsed: ..., execs: ...").
FUZZTIME ?= 60s
.PHONY: fuzz
fuzz: deps
	@set -e; for t in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
		for f in $$(grep -h '^func Fuzz' $$t/*_test.go | sed 's/func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
			echo "== $$t $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$t 2>&1 | tail -4; \
		done; \
	done

# test-a2a-full: the whole multi-process matrix of the a2a host backend
# and of the CUDA backend on the CPU emulator (W in {2,4,8} over shm and
# tcp, D in {1,2}, S from 1 to W, every combine type), plus a sweep of 60
# random in-process worlds of the CUDA backend and 20 with random
# active-rank masks, 200 seeds of the emulator's chaos mode with aborts
# and worker failures injected mid-launch (make test runs 24), and the
# host backend's SIGKILL test over more worlds (a lost replica,
# single-rank domains, restarts beside active node peers); make test runs
# a fast subset of each. A few minutes on 2 cores.
.PHONY: test-a2a-full
test-a2a-full: deps
	FERRY_A2A_FULL=1 $(GO) test $(TESTFLAGS) -count=1 -timeout 20m -run 'TestHostBackendProcesses|TestCUDAEmuBackendProcesses' -v ./tests/a2a/
	FERRY_A2A_FULL=1 $(GO) test $(TESTFLAGS) -count=1 -timeout 20m -run 'TestKilledRankProcesses|TestKilledRankRestartsProcesses' -v ./a2a/host/
	FERRY_A2A_EMU_RANDOM=60 $(GO) test $(TESTFLAGS) -count=1 -timeout 20m -run 'TestEmuRandom|TestEmuMasked' ./a2a/cudabackend/emulated/
	FERRY_A2A_EMU_CHAOS=200 $(GO) test $(TESTFLAGS) -count=1 -timeout 20m -run 'TestEmuChaosAborts' ./a2a/cudabackend/emulated/

# bindings: libferry, the C ABI, into $(BIN)/: libferry.so.1.y.z with the
# SONAME libferry.so.1 and its symlinks, beside its header ferry.h
# (stripped: its symbols and DWARF are in libferry.so.1.y.z.debug). The
# version script exports exactly the functions of ferry.h
# (scripts/bindings.sh). go test ./bindings builds and runs the C and Python
# examples against a fresh copy, and installs it into a scratch prefix.
# install: the library, ferry.h and ferry.pc under $(DESTDIR)$(PREFIX);
# then cc app.c $$(pkg-config --cflags --libs ferry).
PREFIX  ?= /usr/local
DESTDIR ?=
.PHONY: bindings install
bindings: deps
	scripts/bindings.sh build $(BIN)
install: bindings
	scripts/bindings.sh install $(BIN) $(PREFIX) $(DESTDIR)

# wheel: the Python package with libferry.so.1 inside, built offline from
# Debian's python3-build/setuptools/wheel into dist/ferry_rdma-<version>-
# py3-none-linux_x86_64.whl (scripts/wheel.sh; scripts/deps-python.sh
# installs what it needs). test-python: mypy over the package, then its
# tests (bindings/python/tests) with the wheel in a fresh venv of
# /usr/bin/python3: engines in one and two processes (shm, tcp;ofi_rxm,
# ipc), the directory (in process and against etcd), the README's Python
# example, the Python examples, AllToAll on the
# emulator at W 2 and 4 and on the host backend with torch.distributed
# groups, errors and leaks (a few minutes). test-python-full: the whole
# AllToAll configuration matrix.
.PHONY: python-deps wheel test-python test-python-full
python-deps:
	@scripts/deps-python.sh
wheel: bindings python-deps
	scripts/wheel.sh $(BIN)
test-python: wheel
	scripts/test-python.sh $(BIN) fast
test-python-full: wheel
	scripts/test-python.sh $(BIN) full
test: test-python

# bench-compare: paired timing of the work tree against BASE (a revision):
# fabric-debug (tcp, shm, ipc, null), bench-a2a and go test -bench of
# ./fabric, each build of each case alternated N times (default 7); prints
# medians, min/max and new ÷ base (bench/bench-compare, README).
# CASES=a,b picks cases; BENCHFLAGS passes more flags (--poll spin, --json F);
# BASE_PATCH=F applies a patch to the base's tree first (see the README).
N          ?= 7
CASES      ?=
BASE_PATCH ?=
BENCHFLAGS ?=
.PHONY: bench-compare
bench-compare: deps
	@if [ -z "$(BASE)" ]; then echo "usage: make bench-compare BASE=<rev> [N=7] [CASES=tcp-64M,...]"; exit 2; fi
	scripts/bench-compare.sh "$(BASE)" "$(N)" $(if $(CASES),--cases "$(CASES)") $(if $(BASE_PATCH),--base-patch "$(BASE_PATCH)") $(BENCHFLAGS)
