//go:build cgo

package ofi

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestCrashInCReportedByGo: a fault inside C code is reported by the Go
// runtime (the signal, then every goroutine's stack), not by
// libinfinipath's handler, and leaves no *.btr file behind.
func TestCrashInCReportedByGo(t *testing.T) {
	if os.Getenv("FERRY_OFI_FAULT") == "1" {
		FaultForTest()
		return
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(maps), "libinfinipath") {
		if !slices.Contains(ForeignHandlersReset(), syscall.SIGSEGV) {
			t.Fatalf("libinfinipath is loaded but its SIGSEGV handler was not removed (reset: %v)", ForeignHandlersReset())
		}
	} else {
		t.Log("libinfinipath is not loaded by this libfabric: checking the crash report only")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashInCReportedByGo$", "-test.v")
	cmd.Env = append(os.Environ(), "FERRY_OFI_FAULT=1", "GOTRACEBACK=all")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the faulting child exited 0:\n%s", out)
	}
	report := string(out)
	for _, want := range []string{"SIGSEGV", "goroutine ", "FaultForTest"} {
		if !strings.Contains(report, want) {
			t.Errorf("crash report lacks %q:\n%s", want, report)
		}
	}
	if strings.Contains(report, "libinfinipath") {
		t.Errorf("libinfinipath reported the crash:\n%s", report)
	}
	if btr, _ := filepath.Glob(filepath.Join(dir, "*.btr")); len(btr) > 0 {
		t.Errorf("crash files left: %v", btr)
	}
}
