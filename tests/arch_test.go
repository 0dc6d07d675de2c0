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
	"internal/cudaemu",
	"internal/dl",
	"internal/ibv",
	"internal/ofi",
}

// belowFabric may not depend on the engine at all (fabric or any of its
// subpackages): the layers under it in ARCHITECTURE.md. Exceptions are
// named with their reason.
var aboveFabricInInternal = map[string]string{
	// The compile gate enumerates every kernel of the repository, the
	// engine's GPU kernels (fabric/gpu) included: it sits above them.
	"internal/devicecode": "the kernel compile gate lists every package's kernels",
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
// only in the allowed packages, and cuda and internal/* (the lowest layer)
// free of the engine.
func TestLayers(t *testing.T) {
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if len(p.CgoFiles) > 0 && !slices.Contains(cgoAllowed, rel) {
			t.Errorf("%s uses cgo (%v): only %v may; put C calls in one of them", rel, p.CgoFiles, cgoAllowed)
		}
		low := rel == "cuda" || strings.HasPrefix(rel, "cuda/") || strings.HasPrefix(rel, "internal/")
		if _, ok := aboveFabricInInternal[rel]; !low || ok {
			continue
		}
		for _, d := range p.Deps {
			if isEngine(d) {
				t.Errorf("%s depends on %s: cuda and internal/* sit below the engine (shared error categories are in internal/errdefs; the op and event types the C shims read are in the contract, fabric/rdma)", rel, d)
			}
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
