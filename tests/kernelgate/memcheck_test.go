package kernelgate

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// requireNVDisasm returns an nvdisasm for the loaded NVRTC's release, or
// skips (fails under FERRY_TEST_REQUIRE=sass).
func requireNVDisasm(t *testing.T) NVDisasm {
	t.Helper()
	major, minor := requireNVRTC(t)
	p := findNVDisasm(t, major, minor)
	if p == "" {
		testutil.Skip(t, "sass", "SASS check test SKIPPED: no nvdisasm %d.%d or newer (make deps: scripts/deps-cudatools.sh)", major, minor)
	}
	d, err := NewNVDisasm(p)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// mutatedHeader is ferry_device.h with each old string replaced by its
// new one (the line numbers stay).
func mutatedHeader(t *testing.T, repl ...string) string {
	t.Helper()
	hdr := cuda.DeviceHeader().Code
	for i := 0; i+1 < len(repl); i += 2 {
		if !strings.Contains(hdr, repl[i]) {
			t.Fatalf("ferry_device.h has no %q to mutate", repl[i])
		}
		hdr = strings.ReplaceAll(hdr, repl[i], repl[i+1])
	}
	return hdr
}

// checkBuild compiles b for arch with a line table and returns every
// problem the SASS check finds in it.
func checkBuild(t *testing.T, d NVDisasm, b cuda.KernelBuild, hdr, arch string) ([]string, MemSites) {
	t.Helper()
	r, err := CompileWithHeader(b, hdr, arch, "-lineinfo")
	if err != nil {
		t.Fatalf("%s %s: %v", b.Name, arch, err)
	}
	fns, err := d.Disassemble(r.Cubin)
	if err != nil {
		t.Fatal(err)
	}
	src := NewSourceSet(map[string]string{b.Source.Name: b.Source.Code, cuda.DeviceHeaderName: hdr})
	var p []string
	var sites MemSites
	for _, fn := range fns {
		c := CheckMemoryModel(fn, src, b.Options)
		p = append(p, c.Problems...)
		sites.add(c.Sites)
	}
	return p, sites
}

func buildNamed(t *testing.T, name string) cuda.KernelBuild {
	for _, b := range All() {
		if b.Name == name {
			return b
		}
	}
	t.Fatalf("no build %q", name)
	return cuda.KernelBuild{}
}

// TestSASSCheckRefusesWeakenedHeader proves the memory-model check can
// fail: each mutation weakens one ordering primitive of ferry_device.h
// (a release, an acquire, a fence) and must be refused with the reason;
// the same builds through the same path unmutated pass.
func TestSASSCheckRefusesWeakenedHeader(t *testing.T) {
	d := requireNVDisasm(t)
	flags := buildNamed(t, "cuda flags")
	var combine cuda.KernelBuild
	for _, b := range All() {
		if strings.HasPrefix(b.Name, "a2a_combine") {
			combine = b
			break
		}
	}
	cases := []struct {
		name  string
		build cuda.KernelBuild
		arch  string
		repl  []string
		want  string // in some problem; "" = must pass
	}{
		{"unmutated flags", flags, "sm_80", nil, ""},
		{"unmutated flags", flags, "sm_90", nil, ""},
		{"unmutated a2a_combine", combine, "sm_80", nil, ""},
		{"release made relaxed", flags, "sm_80", []string{`"st.release.sys." B`, `"st.relaxed.sys." B`}, "fd_st_release_sys: ST.E.STRONG.SYS at"},
		{"release made relaxed", flags, "sm_90", []string{`"st.release.sys." B`, `"st.relaxed.sys." B`}, "has no MEMBAR at SYS scope"},
		{"release narrowed to gpu", flags, "sm_90", []string{`"st.release.sys." B`, `"st.release.gpu." B`}, "fd_st_release_sys: no access strong at SYS scope"},
		{"release made weak", flags, "sm_80", []string{`"st.release.sys." B`, `"st." B`}, "is not strong at SYS scope"},
		{"acquire made relaxed", flags, "sm_80", []string{`"ld.acquire.sys." B`, `"ld.relaxed.sys." B`}, "has no CCTL.IVALL after it"},
		{"acquire narrowed to gpu", flags, "sm_90", []string{`"ld.acquire.sys." B`, `"ld.acquire.gpu." B`}, "fd_ld_acquire_sys: no access strong at SYS scope"},
		{"a2a release made relaxed", combine, "sm_80", []string{`"st.release.sys." B`, `"st.relaxed.sys." B`}, "fd_st_release_sys"},
		{"a2a fence narrowed to gpu", combine, "sm_90", []string{`"fence.sc.sys;"`, `"fence.sc.gpu;"`}, "fd_fence_sys: no MEMBAR.SC at SYS scope"},
	}
	for _, c := range cases {
		t.Run(c.name+" "+c.arch, func(t *testing.T) {
			p, sites := checkBuild(t, d, c.build, mutatedHeader(t, c.repl...), c.arch)
			if c.want == "" {
				if len(p) != 0 {
					t.Fatalf("unmutated build refused:\n%s", strings.Join(p, "\n"))
				}
				if sites.Acquire == 0 || sites.Release == 0 {
					t.Fatalf("nothing checked: %+v", sites)
				}
				return
			}
			if !strings.Contains(strings.Join(p, "\n"), c.want) {
				t.Fatalf("mutation not refused with %q; problems:\n%s", c.want, strings.Join(p, "\n"))
			}
			t.Logf("refused: %s", p[0])
		})
	}
}

// TestSASSCheckNonCoherentLoads: a load the compiler turns into a
// non-coherent one (const __restrict__) and an explicit fd_ld16_nc, in a
// kernel NCAllowed does not list, are both refused; the same source under
// a listed kernel and function is accepted.
func TestSASSCheckNonCoherentLoads(t *testing.T) {
	d := requireNVDisasm(t)
	code := `
extern "C" __global__ void __launch_bounds__(64) gate_nc(const uint32_t *__restrict__ in, uint32_t *__restrict__ out,
                                                         const fd_v16 *v, fd_v16 *w) {
	out[threadIdx.x] = in[threadIdx.x] + 1u;
	w[threadIdx.x] = fd_ld16_nc(v + threadIdx.x);
}
`
	b := cuda.KernelBuild{Name: "nc", Source: cuda.Source{Name: "nc.cu", Code: code}, Launches: []cuda.KernelLaunch{{Kernel: "gate_nc", MaxBlock: 64}}}
	p, sites := checkBuild(t, d, b, cuda.DeviceHeader().Code, "sm_80")
	got := strings.Join(p, "\n")
	if sites.NCLoads < 2 || strings.Count(got, "a non-coherent load where NCAllowed lists none") < 2 || !strings.Contains(got, "LDG.E.CONSTANT") {
		t.Fatalf("nc loads: %d, problems:\n%s", sites.NCLoads, got)
	}
	saved := NCAllowed
	defer func() { NCAllowed = saved }()
	NCAllowed = append(NCAllowed[:len(NCAllowed):len(NCAllowed)], NCSite{Kernel: "gate_nc", Func: "gate_nc", Why: "test"})
	if p, _ := checkBuild(t, d, b, cuda.DeviceHeader().Code, "sm_80"); len(p) != 0 {
		t.Fatalf("listed nc loads refused:\n%s", strings.Join(p, "\n"))
	}
	// A site listed for builds with a switch (memory written during the
	// launch) is refused without it and accepted with it.
	NCAllowed[len(NCAllowed)-1].Define = "GATE_NC_OK"
	p, _ = checkBuild(t, d, b, cuda.DeviceHeader().Code, "sm_80")
	if got := strings.Join(p, "\n"); len(p) < 2 || !strings.Contains(got, "in a build without -DGATE_NC_OK") {
		t.Fatalf("nc loads of a switched site, built without the switch: problems:\n%s", got)
	}
	b.Options = append(b.Options, "-DGATE_NC_OK=1")
	if p, _ := checkBuild(t, d, b, cuda.DeviceHeader().Code, "sm_80"); len(p) != 0 {
		t.Fatalf("switched nc loads refused with the switch:\n%s", strings.Join(p, "\n"))
	}
}

// TestLineInfoLeavesSASS: the gate compiles with -lineinfo for the SASS
// check and reports registers from that compilation, so the line table
// must not change the code: the same build with and without it
// disassembles to the same instructions.
func TestLineInfoLeavesSASS(t *testing.T) {
	d := requireNVDisasm(t)
	var b cuda.KernelBuild
	for _, x := range All() {
		if strings.HasPrefix(x.Name, "a2a_combine TOPK=8 HIDDEN=7168") {
			b = x
		}
	}
	if b.Name == "" {
		t.Fatal("no a2a_combine TOPK=8 HIDDEN=7168 build")
	}
	text := func(extra ...string) []string {
		r, err := Compile(b, "sm_90", extra...)
		if err != nil {
			t.Fatal(err)
		}
		fns, err := d.Disassemble(r.Cubin)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, fn := range fns {
			for _, in := range fn.Insts {
				out = append(out, fmt.Sprintf("%s %x %s %s %s", fn.Name, in.Addr, in.Pred, in.Op, in.Args))
			}
		}
		return out
	}
	plain, lined := text(), text("-lineinfo")
	if len(plain) < 100 || !slices.Equal(plain, lined) {
		t.Fatalf("-lineinfo changed the SASS (%d vs %d instructions)", len(plain), len(lined))
	}
}
