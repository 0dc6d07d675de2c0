//go:build !cgo || !unix

package dl_test

const cgoEnabled = false
