//go:build !amd64

package ipc

func copyStream(dst, src uintptr, n uintptr) { panic("ipc: copyStream without amd64") }

const haveStream = false
