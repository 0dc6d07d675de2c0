//go:build !cgo || !linux

package cudadrv

import (
	"fmt"
	"strings"
)

// Without cgo (or off Linux) nothing can be loaded; package cuda reports
// ErrNotSupported from every entry point.

func noCgo(what string, candidates []string) error {
	return fmt.Errorf("%s (%s): built with CGO_ENABLED=0 or not on linux: %w",
		what, strings.Join(candidates, ", "), ErrNotSupported)
}

// LoadDriver always fails in this build.
func LoadDriver(candidates []string) (Driver, error) { return nil, noCgo("cuda driver", candidates) }

// LoadNVRTC always fails in this build.
func LoadNVRTC(candidates, preload []string) (NVRTC, error) { return nil, noCgo("nvrtc", candidates) }

// LoadGDR always fails in this build.
func LoadGDR(candidates []string) (GDR, error) { return nil, noCgo("gdrcopy", candidates) }
