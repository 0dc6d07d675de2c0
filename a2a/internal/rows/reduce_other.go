//go:build !amd64 || purego

package rows

import "github.com/ferryrdma/ferry/a2a"

// kernels returns no vector loop: this build runs the pure Go one.
func kernels(a2a.DType) []combineKernel { return nil }
