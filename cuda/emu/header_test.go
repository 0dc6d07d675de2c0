package emu

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ferryrdma/ferry/internal/testutil"

	"github.com/ferryrdma/ferry/cuda"
)

// TestHostHeaderCompiles compiles cuda/testdata/header_api.cu, which uses
// every name of ferry_device.h, with g++ -std=c++20 against the host
// implementation: a name the device side has and the host side lacks (or
// declares differently) fails here.
func TestHostHeaderCompiles(t *testing.T) {
	gxx, err := exec.LookPath("g++")
	if err != nil {
		testutil.Skip(t, "cudaemu", "no g++ here: the emulator needs a C++20 compiler")
	}
	code, err := os.ReadFile("../../cuda/testdata/header_api.cu")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	hdrs, err := hostHeaders()
	if err != nil {
		t.Fatal(err)
	}
	hdrs[cuda.DeviceHeaderName] = cuda.DeviceHeader().Code
	hdrs["header_api.cpp"] = "#include \"ferry_device.h\"\n#line 1 \"header_api.cu\"\n" + string(code)
	for name, text := range hdrs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(gxx, "-std=c++20", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-I", dir, filepath.Join(dir, "header_api.cpp"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, out)
	}
}
