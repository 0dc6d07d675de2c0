package cuda

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric"
)

func errorsIs(err, target error) bool { return errors.Is(err, target) }

func TestSentinelsAreFabrics(t *testing.T) {
	if ErrNotSupported != fabric.ErrNotSupported || ErrClosed != fabric.ErrClosed ||
		ErrInvalidArgument != fabric.ErrInvalidArgument || ErrTimeout != fabric.ErrTimeout {
		t.Fatal("cuda sentinels must be fabric's")
	}
}

func TestErrorMapping(t *testing.T) {
	e := &Error{Op: "cuMemAlloc", Code: 2, Msg: "out of memory"}
	if s := e.Error(); !strings.Contains(s, "CUDA_ERROR_OUT_OF_MEMORY") || !strings.Contains(s, "cuMemAlloc") || !strings.Contains(s, "out of memory") {
		t.Errorf("message %q", s)
	}
	if errors.Is(e, ErrNotSupported) {
		t.Error("out of memory is not 'not supported'")
	}
	for _, code := range []Result{3, 34, 35, 100, 209, 801} {
		if !errors.Is(&Error{Code: code}, ErrNotSupported) {
			t.Errorf("%v should be ErrNotSupported", code)
		}
	}
	if !errors.Is(&Error{Code: 1}, ErrInvalidArgument) {
		t.Error("invalid value should be ErrInvalidArgument")
	}
	if Result(12345).String() != "CUDA_ERROR_12345" || Result(0).String() != "CUDA_SUCCESS" {
		t.Error("Result.String")
	}
	ce := &CompileError{Name: "x.cu", Arch: "sm_90a", Code: 6, Msg: "compilation error", Log: "x.cu(3): error: bad"}
	if !errors.Is(ce, ErrCompile) || !strings.Contains(ce.Error(), "x.cu(3): error: bad") {
		t.Errorf("compile error: %v", ce)
	}
}

func TestPackArgs(t *testing.T) {
	var ptr unsafe.Pointer
	buf, offs, err := packArgs([]any{uint8(1), uint32(2), DevicePtr(0x1000), int16(-1), float32(1.5), true, uint64(7), ptr})
	if err != nil {
		t.Fatal(err)
	}
	want := []uint32{0, 4, 8, 16, 20, 24, 32, 40}
	if len(offs) != len(want) {
		t.Fatalf("offsets %v", offs)
	}
	for i := range want {
		if offs[i] != want[i] {
			t.Fatalf("offsets %v, want %v", offs, want)
		}
	}
	if len(buf) != 48 || buf[0] != 1 || buf[4] != 2 || buf[9] != 0x10 || buf[16] != 0xff || buf[24] != 1 || buf[32] != 7 {
		t.Fatalf("layout % x", buf)
	}
	if _, _, err := packArgs([]any{"string"}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("string argument: %v", err)
	}
	if _, _, err := packArgs(make([]any, 65)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("65 arguments: %v", err)
	}
	if b, o, err := packArgs(nil); err != nil || len(b) != 0 || len(o) != 0 {
		t.Errorf("no arguments: %v", err)
	}
}

func TestPollUntilTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := pollUntil(ctx, "test", func() (bool, error) { return false, nil })
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatal("poll did not stop at the deadline")
	}
	boom := errors.New("boom")
	if err := pollUntil(context.Background(), "test", func() (bool, error) { return false, boom }); err != boom {
		t.Fatalf("error not passed through: %v", err)
	}
}

func TestZeroFlag(t *testing.T) {
	var f Flag
	f.Set(1) // must not crash
	if !f.IsZero() || f.Load() != 0 || f.DevicePtr() != 0 {
		t.Fatal("zero flag")
	}
	if err := f.Wait(context.Background(), 1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("wait on zero flag: %v", err)
	}
	var fs *Flags
	if !fs.Flag(0).IsZero() || fs.Close() != nil {
		t.Fatal("nil Flags")
	}
	for k, s := range map[FlagKind]string{FlagAuto: "auto", FlagHostMapped: "host-mapped", FlagGDR: "gdrcopy", 9: "FlagKind(9)"} {
		if k.String() != s {
			t.Errorf("%d: %s", int(k), k.String())
		}
	}
	if MemoryDevice.String() != "device" || MemoryType(0).String() != "unknown" {
		t.Error("MemoryType.String")
	}
}

// Nil receivers are programming errors: they get ErrInvalidArgument (or
// are no-ops for Close), never a panic.
func TestNilReceivers(t *testing.T) {
	var c *Context
	if _, err := c.Alloc(1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil context: %v", err)
	}
	var m *DeviceMemory
	if err := m.CopyFromHost(0, []byte{1}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil memory: %v", err)
	}
	var st *Stream
	if err := st.Synchronize(); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil stream: %v", err)
	}
	if _, err := st.Capture(CaptureGlobal, func(*Stream) error { return nil }); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil stream capture: %v", err)
	}
	var f *Function
	if err := f.Launch(LaunchConfig{}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil function: %v", err)
	}
	var e *Event
	if err := e.Record(nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil event: %v", err)
	}
	var g *Graph
	if _, err := g.Instantiate(); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil graph: %v", err)
	}
	var ge *GraphExec
	if err := ge.Launch(nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil graph exec: %v", err)
	}
	for _, cl := range []interface{ Close() error }{m, st, e, g, ge, (*HostMemory)(nil), (*Module)(nil)} {
		if err := cl.Close(); err != nil {
			t.Errorf("%T.Close on nil: %v", cl, err)
		}
	}
}
