package kernelargs

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
	"unsafe"
)

// devicePtr stands for cuda.DevicePtr (this package sits below cuda).
type devicePtr uint64

type pod struct {
	A uint8
	B uint32
	C uint16
}

// TestPackDriverLayout is the list package cuda's launch test packed
// before the ABI was shared, with its offsets and bytes.
func TestPackDriverLayout(t *testing.T) {
	var ptr unsafe.Pointer
	p, err := Pack([]any{uint8(1), uint32(2), devicePtr(0x1000), int16(-1), float32(1.5), true, uint64(7), ptr})
	if err != nil {
		t.Fatal(err)
	}
	wantOffs := []uint32{0, 4, 8, 16, 20, 24, 32, 40}
	wantSizes := []uint32{1, 4, 8, 2, 4, 1, 8, 8}
	if !reflect.DeepEqual(p.Offsets, wantOffs) || !reflect.DeepEqual(p.Sizes, wantSizes) {
		t.Fatalf("offsets %v sizes %v, want %v %v", p.Offsets, p.Sizes, wantOffs, wantSizes)
	}
	b := p.Buf
	if len(b) != 48 || b[0] != 1 || b[4] != 2 || b[9] != 0x10 || b[16] != 0xff || b[17] != 0xff ||
		binary.LittleEndian.Uint32(b[20:]) != 0x3fc00000 || b[24] != 1 || b[32] != 7 {
		t.Fatalf("layout % x", b)
	}
}

// TestPackA2ALaunch is the dispatch-send argument list of the a2a
// kernels (a2a/cudabackend Steps), which both the driver and the
// emulator launch: nine 8-byte values around one 4-byte token count.
func TestPackA2ALaunch(t *testing.T) {
	args := []any{uint64(1), uint64(2), uint64(3), uint64(4), uint64(5), uint64(6), uint64(7), uint32(8), uint64(9), uint64(10)}
	p, err := Pack(args)
	if err != nil {
		t.Fatal(err)
	}
	want := []uint32{0, 8, 16, 24, 32, 40, 48, 56, 64, 72}
	if !reflect.DeepEqual(p.Offsets, want) || len(p.Buf) != 80 {
		t.Fatalf("offsets %v (%d bytes), want %v", p.Offsets, len(p.Buf), want)
	}
	if binary.LittleEndian.Uint32(p.Buf[56:]) != 8 || binary.LittleEndian.Uint64(p.Buf[64:]) != 9 {
		t.Fatalf("layout % x", p.Buf)
	}
}

// TestPackMatchesStructLayout checks Pack's offsets against the layout of
// a struct with the same fields, which is the C ABI's on the platforms
// ferry builds for: what the emulator's trampoline and the driver's
// parameter pointers both expect.
func TestPackMatchesStructLayout(t *testing.T) {
	cases := [][]any{
		{uint8(1), uint16(2), uint32(3), uint64(4)},
		{true, int64(-1), int8(3), float64(2), uint16(1)},
		{uint8(9), pod{A: 1, B: 2, C: 3}, uint8(7), devicePtr(5)},
		{int16(1), pod{}, pod{}, float32(1)},
		{uintptr(1), int(2), uint(3), int32(4)},
	}
	for _, args := range cases {
		p, err := Pack(args)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		fields := make([]reflect.StructField, len(args))
		for i, a := range args {
			fields[i] = reflect.StructField{Name: "F" + string(rune('A'+i)), Type: reflect.TypeOf(a)}
		}
		st := reflect.StructOf(fields)
		v := reflect.New(st).Elem()
		for i, a := range args {
			if p.Offsets[i] != uint32(st.Field(i).Offset) || p.Sizes[i] != uint32(st.Field(i).Type.Size()) {
				t.Errorf("%T in %v: offset %d size %d, the struct has %d %d", a, args, p.Offsets[i], p.Sizes[i],
					st.Field(i).Offset, st.Field(i).Type.Size())
			}
			v.Field(i).Set(reflect.ValueOf(a))
		}
		end := p.Offsets[len(args)-1] + p.Sizes[len(args)-1]
		mem := unsafe.Slice((*byte)(v.Addr().UnsafePointer()), st.Size())
		for i := range args {
			o, n := p.Offsets[i], p.Sizes[i]
			if string(p.Buf[o:o+n]) != string(mem[o:o+n]) {
				t.Errorf("%v: argument %d bytes % x, the struct holds % x", args, i, p.Buf[o:o+n], mem[o:o+n])
			}
		}
		if uint32(len(p.Buf)) != end {
			t.Errorf("%v: %d bytes packed, the last argument ends at %d", args, len(p.Buf), end)
		}
	}
}

func TestPackRefuses(t *testing.T) {
	type withPtr struct{ P *int }
	for _, a := range []any{"string", nil, []byte{1}, withPtr{}, [2]uint32{}, &pod{}, complex64(1)} {
		_, err := Pack([]any{uint32(1), a})
		var ue *UnsupportedError
		if !errors.As(err, &ue) || ue.Index != 1 {
			t.Errorf("%T: %v", a, err)
		}
	}
	if p, err := Pack(nil); err != nil || len(p.Buf) != 0 || len(p.Offsets) != 0 {
		t.Errorf("no arguments: %+v %v", p, err)
	}
}

// BenchmarkPackA2ALaunch packs the a2a dispatch-send argument list, as
// every launch of the a2a kernels does on the GPU and on the emulator.
func BenchmarkPackA2ALaunch(b *testing.B) {
	args := []any{uint64(1), uint64(2), uint64(3), uint64(4), uint64(5), uint64(6), uint64(7), uint32(8), uint64(9), uint64(10)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Pack(args); err != nil {
			b.Fatal(err)
		}
	}
}
