//go:build amd64 && !purego

package rows

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// copyStream copies n bytes (a multiple of 128; dst 32-byte aligned) with
// non-temporal stores, unfenced (copy_amd64.s).
//
//go:noescape
func copyStream(dst, src unsafe.Pointer, n int)

// fence is SFENCE (copy_amd64.s).
func fence()

var haveStream = cpu.X86.HasAVX2

// stream copies src into dst (same length), the 32-byte aligned middle
// of dst streamed, and reports whether it could.
func stream(dst, src []byte) bool {
	if !haveStream {
		return false
	}
	n := len(src)
	d := unsafe.Pointer(unsafe.SliceData(dst))
	head := int(-uintptr(d) & 31)
	body := (n - head) &^ 127
	copy(dst[:head], src[:head])
	copyStream(unsafe.Add(d, head), unsafe.Pointer(unsafe.SliceData(src[head:])), body)
	copy(dst[head+body:], src[head+body:])
	return true
}
