//go:build !cgo || !linux

package cuda

const cgoEnabled = false
