package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/ferryrdma/ferry"

// cgoAllowed are the only packages that may import "C": the thin
// bindings to libfabric, libibverbs, the CUDA driver and dlopen, the C ABI
// itself, and the CPU emulator of CUDA kernels (which compiles .cu sources
// with a C++ compiler, for tests and bench-a2a's emulated backend).
var cgoAllowed = []string{
	"bindings",
	"internal/cudadrv",
	"cuda/emu",
	"internal/dl",
	"internal/ibv",
	"internal/ofi",
}

type listedPackage struct {
	ImportPath string
	CgoFiles   []string
	Deps       []string
}

func listPackages(t *testing.T) []listedPackage {
	t.Helper()
	cmd := exec.Command(goTool(), "list", "-json", module+"/...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	var pkgs []listedPackage
	dec := json.NewDecoder(bufio.NewReader(bytes.NewReader(out)))
	for dec.More() {
		var p listedPackage
		require.NoError(t, dec.Decode(&p))
		pkgs = append(pkgs, p)
	}
	require.NotEmpty(t, pkgs)
	return pkgs
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}

// TestLayers holds the layering of ARCHITECTURE.md against the code: cgo
// only in the allowed packages; cuda (with its emulator, cuda/emu) and
// internal/* (the lowest layers) free of the engine; internal/* (but its
// test helpers) free of cuda, which sits on it.
func TestLayers(t *testing.T) {
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if len(p.CgoFiles) > 0 && !slices.Contains(cgoAllowed, rel) {
			t.Errorf("%s uses cgo (%v): only %v may; put C calls in one of them", rel, p.CgoFiles, cgoAllowed)
		}
		internal := strings.HasPrefix(rel, "internal/")
		if !internal && rel != "cuda" && !strings.HasPrefix(rel, "cuda/") {
			continue
		}
		for _, d := range p.Deps {
			if isEngine(d) {
				t.Errorf("%s depends on %s: cuda and internal/* sit below the engine (shared error categories are in internal/errdefs; the op and event types the C shims read are in the contract, fabric/rdma)", rel, d)
			}
			// Test helpers (internal/testutil/...) serve the tests of the
			// packages they help and may sit above them.
			if internal && !strings.HasPrefix(rel, "internal/testutil") &&
				(d == module+"/cuda" || strings.HasPrefix(d, module+"/cuda/")) {
				t.Errorf("%s depends on %s: internal/* sits below cuda (cuda's emulator is cuda/emu)", rel, d)
			}
		}
	}
}

// TestEmulatorStaysOut holds the a2a CUDA backend free of the emulator:
// the backend (and the driver path under it) must not link cuda/emu, so
// only programs that import a2a/cudabackend/emulated carry it.
func TestEmulatorStaysOut(t *testing.T) {
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if rel != "a2a/cudabackend" && rel != "cuda" && rel != "fabric/gpu" {
			continue
		}
		if slices.Contains(p.Deps, module+"/cuda/emu") {
			t.Errorf("%s depends on cuda/emu: only a2a/cudabackend/emulated (and tests) may", rel)
		}
	}
}

// contract is the provider contract package: a leaf that engine and
// providers share (ARCHITECTURE.md), as database/sql/driver serves drivers.
const contract = module + "/fabric/rdma"

// isEngine reports whether the import path d is the engine: fabric or one
// of its subpackages other than the contract.
func isEngine(d string) bool {
	return d == module+"/fabric" || (strings.HasPrefix(d, module+"/fabric/") && d != contract)
}

// providerRoots are the provider packages (with their subpackages) and the
// package that links them all in.
var providerRoots = []string{"efa", "verbs", "ipc", "memfabric", "providers"}

// TestProvidersUseOnlyTheContract holds the provider boundary: a provider
// imports the contract (fabric/rdma), never the engine, so the engine can
// change without touching them and a provider's dependencies stay small;
// and the contract itself is a leaf, depending on nothing of the module but
// internal/* helpers below it.
func TestProvidersUseOnlyTheContract(t *testing.T) {
	var sawProvider, sawContract bool
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if p.ImportPath == contract {
			sawContract = true
			for _, d := range p.Deps {
				if strings.HasPrefix(d, module+"/") && !strings.HasPrefix(d, module+"/internal/") {
					t.Errorf("fabric/rdma depends on %s: the contract is a leaf (only internal/* helpers below it)", d)
				}
			}
			continue
		}
		if !slices.ContainsFunc(providerRoots, func(r string) bool { return rel == r || strings.HasPrefix(rel, r+"/") }) {
			continue
		}
		sawProvider = true
		for _, d := range p.Deps {
			if isEngine(d) {
				t.Errorf("%s depends on %s: providers import the contract (fabric/rdma), never the engine", rel, d)
			}
		}
	}
	if !sawProvider || !sawContract {
		t.Fatalf("go list found no provider package (%v) or no contract package (%s): the rule checked nothing", sawProvider, contract)
	}
}

// etcdAllowed are the only packages that may depend on the etcd client:
// the directory's etcd backend and the programs that take an etcd://
// directory (the tools, libferry's ferry_directory_open, the worked
// program of pools meeting through one). The engine, and the directory's core with its in-process
// backend, stay free of it, so programs that do not use etcd do not link
// its client (and gRPC).
var etcdAllowed = []string{
	"fabric/directory/etcd",
	"bench/fabric-debug",
	"bench/bench-a2a",
	"bindings",
	"examples/disagg-pools",
}

// TestEtcdStaysOptional holds the above.
func TestEtcdStaysOptional(t *testing.T) {
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if slices.Contains(etcdAllowed, rel) {
			continue
		}
		for _, d := range p.Deps {
			if strings.HasPrefix(d, "go.etcd.io/") {
				t.Errorf("%s depends on %s: only %v may link the etcd client", rel, d, etcdAllowed)
				break
			}
		}
	}
}
