package kernelgate

import (
	"strings"
	"testing"
)

// A hand-made header and kernel with the line numbers the canned SASS
// below refers to (ferry_device.h line 3 stamps out the loads and stores,
// line 4 is the system fence; k.cu line 2 waits, line 3 publishes).
var cannedSources = NewSourceSet(map[string]string{
	"ferry_device.h": "// header\n#define FD_LDST_(T, B, C) ...\nFD_LDST_(unsigned int, \"b32\", \"r\")\nFD_DEV void fd_fence_sys() { asm volatile(\"fence.sc.sys;\" ::: \"memory\"); }\n",
	"k.cu": "extern \"C\" __global__ void __launch_bounds__(32) k(const uint32_t *in, uint32_t *out) {\n" +
		"\twhile (fd_ld_acquire_sys(in) != 1u) {}\n" +
		"\tfd_st_release_sys(out, 2u);\n" +
		"\tout[1] = in[1];\n}\n",
})

// cannedSASS is nvdisasm -c -gi output in the form 11.8 prints for sm_80,
// with {LOAD}, {CCTL}, {MEMBAR}, {STORE} and {NC} to fill in.
const cannedSASS = `
	.section	.text.k,"ax",@progbits
k:
	//## File "/w/k.cu", line 1
        /*0000*/                   IMAD.MOV.U32 R1, RZ, RZ, c[0x0][0x28] ;
.L_x_0:
	//## File "/w/ferry_device.h", line 3 inlined at "/w/k.cu", line 2
	//## File "/w/k.cu", line 2
        /*0010*/                   {LOAD} R0, [R2.64] ;
	//## File "/w/k.cu", line 2
        /*0020*/                   ISETP.NE.AND P0, PT, R0, 0x1, PT ;
        /*0030*/                   {CCTL} ;
        /*0040*/               @P0 BRA ` + "`" + `(.L_x_0) ;
	//## File "/w/ferry_device.h", line 3 inlined at "/w/k.cu", line 3
        /*0050*/                   {MEMBAR} ;
        /*0060*/                   ERRBAR;
        /*0070*/                   {STORE} [R4.64], R5 ;
	//## File "/w/k.cu", line 4
        /*0080*/                   {NC} R6, [R2.64+0x4] ;
        /*0090*/                   STG.E [R4.64+0x4], R6 ;
        /*00a0*/                   EXIT ;
`

func canned(load, cctl, membar, store, nc string) SASSFunction {
	r := strings.NewReplacer("{LOAD}", load, "{CCTL}", cctl, "{MEMBAR}", membar, "{STORE}", store, "{NC}", nc)
	fns := parseSASS(r.Replace(cannedSASS))
	if len(fns) != 1 {
		panic("canned SASS")
	}
	return fns[0]
}

func TestParseSASS(t *testing.T) {
	fn := canned("LD.E.STRONG.SYS", "CCTL.IVALL", "MEMBAR.ALL.SYS", "ST.E.STRONG.SYS", "LDG.E")
	if fn.Name != "k" || len(fn.Insts) != 11 {
		t.Fatalf("%s: %d instructions", fn.Name, len(fn.Insts))
	}
	ld := fn.Insts[1]
	if ld.Op != "LD.E.STRONG.SYS" || !ld.Target || len(ld.Loc) != 2 || ld.Loc[0].Line != 3 || ld.Loc[1].Line != 2 {
		t.Fatalf("load %+v", ld)
	}
	if br := fn.Insts[4]; br.Pred != "@P0" || br.Op != "BRA" {
		t.Fatalf("branch %+v", br)
	}
	if c := fn.Insts[3]; len(c.Loc) != 1 || c.Loc[0].Line != 2 {
		t.Fatalf("the CCTL belongs to the caller's line: %+v", c)
	}
}

// TestCheckMemoryModelCanned: the rules on hand-made SASS, without NVRTC
// or nvdisasm: the right SASS passes, and each weakening is refused.
func TestCheckMemoryModelCanned(t *testing.T) {
	good := []string{"LD.E.STRONG.SYS", "CCTL.IVALL", "MEMBAR.ALL.SYS", "ST.E.STRONG.SYS", "LDG.E"}
	cases := []struct {
		name string
		at   int
		op   string
		want string
	}{
		{"good", -1, "", ""},
		{"sm_90 spelling", 0, "LDG.E.STRONG.SYS", ""},
		{"fence instead of membar", 2, "MEMBAR.SC.SYS", ""},
		{"acquire without invalidation", 1, "NOP", "has no CCTL.IVALL after it"},
		{"acquire at gpu scope", 0, "LD.E.STRONG.GPU", "not strong at SYS scope"},
		{"weak acquire", 0, "LD.E", "not strong at SYS scope"},
		{"release without membar", 2, "NOP", "has no MEMBAR at SYS scope"},
		{"release with gpu membar", 2, "MEMBAR.ALL.GPU", "has no MEMBAR at SYS scope"},
		{"release at gpu scope", 3, "ST.E.STRONG.GPU", "fd_st_release_sys: no access strong at SYS scope"},
		{"unlisted nc load", 4, "LDG.E.CONSTANT", "a non-coherent load where NCAllowed lists none"},
	}
	for _, c := range cases {
		ops := append([]string(nil), good...)
		if c.at >= 0 {
			ops[c.at] = c.op
		}
		mc := CheckMemoryModel(canned(ops[0], ops[1], ops[2], ops[3], ops[4]), cannedSources, nil)
		got := strings.Join(mc.Problems, "\n")
		if c.want == "" {
			if got != "" || mc.Sites.Acquire != 1 || mc.Sites.Release != 1 {
				t.Errorf("%s: refused or not counted (%+v):\n%s", c.name, mc.Sites, got)
			}
			continue
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: want %q, got:\n%s", c.name, c.want, got)
		}
	}
}

func TestEnclosingFunc(t *testing.T) {
	lines := strings.Split(`__device__ __forceinline__ void helper(const uint8_t *p,
                                            uint32_t n) {
	for (;;) {
		x = fd_ld16_nc(p);
	}
}
extern "C" __global__ void __launch_bounds__(64, 1)
kern(uint32_t *out) {
	helper(0, 1);
}`, "\n")
	if f := enclosingFunc(lines, 4); f != "helper" {
		t.Errorf("line 4 in %q", f)
	}
	if f := enclosingFunc(lines, 9); f != "kern" {
		t.Errorf("line 9 in %q", f)
	}
}
