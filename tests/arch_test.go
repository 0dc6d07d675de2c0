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
// internal/* (the lowest layers) free of the engine; internal/* free of
// cuda, which sits on it.
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
			if d == module+"/fabric" || strings.HasPrefix(d, module+"/fabric/") {
				t.Errorf("%s depends on %s: cuda and internal/* sit below the engine (shared error categories are in internal/errdefs)", rel, d)
			}
			if internal && (d == module+"/cuda" || strings.HasPrefix(d, module+"/cuda/")) {
				t.Errorf("%s depends on %s: internal/* sits below cuda", rel, d)
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

// etcdAllowed are the only packages that may depend on the etcd client:
// the directory's etcd backend and the tools that take an etcd://
// directory. The engine, and the directory's core with its in-process
// backend, stay free of it, so programs that do not use etcd do not link
// its client (and gRPC).
var etcdAllowed = []string{
	"fabric/directory/etcd",
	"bench/fabric-debug",
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
