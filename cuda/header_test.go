package cuda

import (
	_ "embed"
	"errors"
	"strings"
	"testing"

	"github.com/ferryrdma/ferry/internal/testutil"
)

//go:embed testdata/header_api.cu
var headerAPICode string

// TestDeviceHeaderCompiles compiles a kernel that uses every name of
// ferry_device.h with the NVRTC found here (no driver needed) to sm_80 and
// sm_90 cubins, which is where inline PTX mistakes show.
func TestDeviceHeaderCompiles(t *testing.T) {
	major, minor, err := NVRTCVersion()
	testutil.SkipIfNotSupported(t, "nvrtc", err)
	src := Source{Name: "header_api.cu", Code: headerAPICode}
	for _, arch := range []string{"sm_80", "sm_90"} {
		res, err := CompileSource(src, arch, "-Xptxas=-v")
		if err != nil {
			t.Fatalf("nvrtc %d.%d %s: %v", major, minor, arch, err)
		}
		if res.Arch != arch || res.Note != "" || !strings.Contains(res.Log, "Compiling entry function 'header_api' for '"+arch+"'") {
			t.Fatalf("%s: arch %q note %q log:\n%s", arch, res.Arch, res.Note, res.Log)
		}
	}
	// A mistake in a source is reported with the source's own name and
	// line, not shifted by the header included before it.
	_, err = CompileSource(Source{Name: "broken.cu", Code: "\n\nextern \"C\" __global__ void k() { undefined_thing(); }"}, "sm_80")
	var ce *CompileError
	if !errors.As(err, &ce) || !strings.Contains(ce.Log, "broken.cu(3)") {
		t.Fatalf("compile error: %v", err)
	}
	// sm_90a where NVRTC predates it: the portable target, said so.
	res, err := CompileSource(src, "sm_90a")
	if err != nil {
		t.Fatal(err)
	}
	if major < 12 && (res.Arch != "sm_90" || !strings.Contains(res.Note, "no sm_90a target")) {
		t.Fatalf("nvrtc %d.%d sm_90a: arch %q note %q", major, minor, res.Arch, res.Note)
	}
	t.Logf("nvrtc %d.%d: sm_90a -> %s (%s)", major, minor, res.Arch, res.Note)
}
