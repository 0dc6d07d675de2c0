package cudadrv

import (
	"errors"
	"strings"
	"testing"
)

func TestLoadMissingLibraries(t *testing.T) {
	const missing = "/nonexistent/ferry/libcuda.so.1"
	if _, err := LoadDriver([]string{missing}); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("LoadDriver: %v", err)
	} else if !strings.Contains(err.Error(), missing) {
		t.Fatalf("error %q does not name the candidate", err)
	}
	if _, err := LoadNVRTC([]string{"/nonexistent/libnvrtc.so"}, nil); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("LoadNVRTC: %v", err)
	}
	if _, err := LoadGDR([]string{"/nonexistent/libgdrapi.so.2"}); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("LoadGDR: %v", err)
	}
}
