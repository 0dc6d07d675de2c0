package cudadrv

import "unsafe"

func ptrOf(p *uint32) unsafe.Pointer { return unsafe.Pointer(p) }
