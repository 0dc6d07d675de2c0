package kernelargs

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"unsafe"
)

// Packed is an argument list laid out for a launch.
type Packed struct {
	// Buf holds every argument at its offset, with zero padding between.
	Buf []byte
	// Offsets and Sizes are where each argument starts and its size in
	// bytes, in argument order.
	Offsets, Sizes []uint32
}

// UnsupportedError is an argument of a type no kernel parameter takes.
type UnsupportedError struct {
	Index int
	Value any
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("argument %d has unsupported type %T", e.Index, e.Value)
}

// Pack lays args out as the package comment says. An argument of another
// type fails with an *UnsupportedError.
func Pack(args []any) (Packed, error) {
	n := len(args)
	words := make([]uint32, 2*n) // offsets and sizes in one allocation
	p := Packed{Buf: make([]byte, 0, 8*n), Offsets: words[:0:n], Sizes: words[n : n : 2*n]}
	for i, a := range args {
		if !p.add(a) {
			return Packed{}, &UnsupportedError{Index: i, Value: a}
		}
	}
	return p, nil
}

// word appends v as a size-byte little-endian word aligned to its size.
func (p *Packed) word(size int, v uint64) {
	p.align(size)
	p.Offsets = append(p.Offsets, uint32(len(p.Buf)))
	p.Sizes = append(p.Sizes, uint32(size))
	switch size {
	case 1:
		p.Buf = append(p.Buf, byte(v))
	case 2:
		p.Buf = binary.LittleEndian.AppendUint16(p.Buf, uint16(v))
	case 4:
		p.Buf = binary.LittleEndian.AppendUint32(p.Buf, uint32(v))
	default:
		p.Buf = binary.LittleEndian.AppendUint64(p.Buf, v)
	}
}

func (p *Packed) align(n int) {
	for len(p.Buf)%n != 0 {
		p.Buf = append(p.Buf, 0)
	}
}

// add packs one argument; the common types take the switch, without
// reflection.
func (p *Packed) add(a any) bool {
	switch v := a.(type) {
	case bool:
		b := uint64(0)
		if v {
			b = 1
		}
		p.word(1, b)
	case int8:
		p.word(1, uint64(v))
	case uint8:
		p.word(1, uint64(v))
	case int16:
		p.word(2, uint64(v))
	case uint16:
		p.word(2, uint64(v))
	case int32:
		p.word(4, uint64(v))
	case uint32:
		p.word(4, uint64(v))
	case float32:
		p.word(4, uint64(math.Float32bits(v)))
	case int64:
		p.word(8, uint64(v))
	case uint64:
		p.word(8, v)
	case int:
		p.word(8, uint64(v))
	case uint:
		p.word(8, uint64(v))
	case uintptr:
		p.word(8, uint64(v))
	case float64:
		p.word(8, math.Float64bits(v))
	case unsafe.Pointer:
		p.word(8, uint64(uintptr(v)))
	default:
		return p.reflected(reflect.ValueOf(a))
	}
	return true
}

// reflected packs named scalar types by their kind and pointer-free
// structs by their memory.
func (p *Packed) reflected(rv reflect.Value) bool {
	switch rv.Kind() {
	case reflect.Bool:
		b := uint64(0)
		if rv.Bool() {
			b = 1
		}
		p.word(1, b)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		p.word(int(rv.Type().Size()), uint64(rv.Int()))
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint, reflect.Uintptr:
		p.word(int(rv.Type().Size()), rv.Uint())
	case reflect.Float32:
		p.word(4, uint64(math.Float32bits(float32(rv.Float()))))
	case reflect.Float64:
		p.word(8, math.Float64bits(rv.Float()))
	case reflect.Struct:
		t := rv.Type()
		if hasPointers(t) {
			return false
		}
		c := reflect.New(t)
		c.Elem().Set(rv)
		p.align(max(t.Align(), 1))
		p.Offsets = append(p.Offsets, uint32(len(p.Buf)))
		p.Sizes = append(p.Sizes, uint32(t.Size()))
		p.Buf = append(p.Buf, unsafe.Slice((*byte)(c.UnsafePointer()), t.Size())...)
	default:
		return false
	}
	return true
}

func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.String, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return hasPointers(t.Elem())
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}
