package cudabackend

import (
	"errors"
	"strings"
	"testing"

	"github.com/ferryrdma/ferry/a2a"
)

func TestSourcesAreWholeUnits(t *testing.T) {
	srcs, err := Sources()
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) != 2 {
		t.Fatalf("%d sources, want the dispatch and combine files", len(srcs))
	}
	all := ""
	for _, s := range srcs {
		if strings.Contains(s.Code, "#include \"a2a_") {
			t.Errorf("%s still includes a file", s.Name)
		}
		if !strings.Contains(s.Code, "struct a2a_params {") {
			t.Errorf("%s lacks the shared definitions", s.Name)
		}
		all += s.Code
	}
	for _, k := range append(kernelNames[:], probeKernel) {
		if !declares(all, k) {
			t.Errorf("kernel %s not in the sources", k)
		}
	}
}

func TestShapesAndDefines(t *testing.T) {
	cfg := a2a.Config{WorldSize: 8, NVLinkSize: 4, MaxTokens: 128, Hidden: 7168, Scales: 56, DispatchType: a2a.FP8,
		CombineType: a2a.BF16, Experts: 256, ExpertsPerToken: 8}
	l, err := cfg.Layout()
	if err != nil {
		t.Fatal(err)
	}
	s, ok := ShapeOf(&l)
	if !ok {
		t.Fatalf("%+v is not specialised", s)
	}
	d := strings.Join(Defines("a2a/a2a_dispatch.cu", 512, s, true), " ")
	c := strings.Join(Defines("a2a/a2a_combine.cu", 512, s, true), " ")
	if d != "-DA2A_THREADS=512 -DA2A_TOPK=8 -DA2A_TOKEN_BYTES=7168 -DA2A_SCALES=56" ||
		c != "-DA2A_THREADS=512 -DA2A_TOPK=8 -DA2A_HIDDEN=7168 -DA2A_COMBINE_TYPE=2" {
		t.Fatalf("defines %q and %q", d, c)
	}
	cfg.Hidden = 7000
	if l, err = cfg.Layout(); err != nil {
		t.Fatal(err)
	}
	if _, ok := ShapeOf(&l); ok {
		t.Fatal("hidden 7000 taken for a specialised shape")
	}
	// The fp8 and bf16 shapes of one hidden size share the combine build.
	if n, m := len(Variants("a2a/a2a_dispatch.cu")), len(Variants("a2a/a2a_combine.cu")); n != 7 || m != 4 {
		t.Fatalf("%d dispatch and %d combine builds, want 7 and 4", n, m)
	}
	// Plus, per source, the decode shape with the sm_90 loads.
	if n := len(KernelBuilds()); n != 13 {
		t.Fatalf("%d kernel builds, want 13", n)
	}
}

func TestKernelErrorCategories(t *testing.T) {
	worker := errors.New("engine closed")
	for _, c := range []struct {
		e    *KernelError
		want error
		text string
	}{
		{&KernelError{Phase: "dispatch recv", Status: statusTimeout, Awaited: AwaitNodeDispatch, Peer: 2}, a2a.ErrTimeout, "node rank 2"},
		{&KernelError{Phase: "dispatch send", Status: statusBadIndex}, a2a.ErrInvalidArgument, "out of range"},
		{&KernelError{Phase: "combine recv", Status: statusBadShape}, ErrKernel, "does not match"},
		{&KernelError{Phase: "combine send", Status: 0, Worker: worker}, ErrKernel, "engine closed"},
	} {
		if !errors.Is(c.e, c.want) || !strings.Contains(c.e.Error(), c.text) {
			t.Errorf("%v: want %v and %q", c.e, c.want, c.text)
		}
	}
	e := &KernelError{Status: statusTimeout, Awaited: AwaitRDMACombine, Worker: worker}
	if !errors.Is(e, worker) || !errors.Is(e, a2a.ErrTimeout) {
		t.Errorf("%v does not wrap both the timeout and the worker's error", e)
	}
}
