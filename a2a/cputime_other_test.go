//go:build !linux

package a2a_test

func threadCPU() int64 { return 0 }
