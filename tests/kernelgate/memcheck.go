package kernelgate

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// The SASS memory-model check. ferry's kernels order memory only through
// the primitives of ferry_device.h (inline PTX: ld.acquire.sys,
// st.release.sys, fence.sc.sys, atom.acq_rel.sys, ...). With -lineinfo
// every SASS instruction carries its source position through inlining,
// so the instructions a primitive became can be found (innermost frame:
// the header line that defines the primitive) and so can what the caller
// asked for (the next frame out: the source line that calls fd_..._sys).
// The check holds the SASS to what the calling line names, so a header
// whose PTX was weakened, or a compiler that weakened it, fails:
//
//   flag wait     fd_ld_acquire_S   each load strong at scope >= S, each followed by CCTL.IVALL
//   publication   fd_st_release_S   each strong store at scope >= S preceded by MEMBAR.{ALL,SC}.>=S
//   fence         fd_fence_S        a MEMBAR.SC.>=S
//   acq_rel RMW   fd_atomic_*_acq_rel_S  MEMBAR before, CCTL.IVALL after, the atomic strong at >= S
//   relaxed       fd_ld/st_relaxed_S, fd_atomic_*_S  the access strong at scope >= S
// and no memory access at such a site is weaker than the weakest scope the
// line names. Loads through the constant (non-coherent) cache, from
// fd_ld16_nc or made by the compiler from const __restrict__ pointers,
// are allowed only in the (kernel, function) pairs of NCAllowed.
//
// What it cannot show: that the right primitive was called (a wait that
// should have been a system-scope acquire and is written as a plain load
// is not a site); the hardware's behaviour (only a GPU shows that).

// NCSite is a place where loads through the non-coherent constant cache
// are accepted: the kernel, and the source function whose line issues the
// load (after inlining of the header's own fd_ld16_nc).
type NCSite struct {
	Kernel, Func string
	Why          string
	// Define, when set, accepts the load only in builds compiled with
	// -D<Define>: memory that peers or the NIC write while the kernel
	// runs may be read through the non-coherent cache only where the
	// backend opts in (compute capability 9.0), never by default.
	Define string
}

// NCAllowed lists where ferry's kernels may read through the
// non-coherent cache.
var NCAllowed = []NCSite{
	{Kernel: "a2a_dispatch_send", Func: "a2a_dispatch_send", Why: "x, the caller's input tokens: nothing writes them while the kernel runs"},
	{Kernel: "a2a_dispatch_send", Func: "a2a_copy", Why: "x rows copied to the send buffers and node peers: read-only input"},
	{Kernel: "a2a_combine_send", Func: "a2a_copy", Why: "y, the experts' output: read-only input"},
	{Kernel: "a2a_dispatch_recv", Func: "a2a_copy_out", Why: "rows of the receive buffer, written by peers and the NIC during the launch",
		Define: "A2A_NC_PEER_LOADS"},
	{Kernel: "a2a_combine_recv", Func: "a2a_reduce_chunk", Why: "rows of the receive buffer, written by peers and the NIC during the launch",
		Define: "A2A_NC_PEER_LOADS"},
}

// MemSites counts what the check examined in one function.
type MemSites struct {
	Acquire, Release, Fence, AcqRelRMW, Relaxed int // ordering sites (call lines)
	NCLoads                                     int // non-coherent loads, all accepted when Problems is empty
}

func (s *MemSites) add(o MemSites) {
	s.Acquire += o.Acquire
	s.Release += o.Release
	s.Fence += o.Fence
	s.AcqRelRMW += o.AcqRelRMW
	s.Relaxed += o.Relaxed
	s.NCLoads += o.NCLoads
}

// MemCheck is the check of one SASS function.
type MemCheck struct {
	Function string
	Sites    MemSites
	Problems []string
}

// SourceSet resolves the file names in a line table to source text.
type SourceSet map[string][]string // name (as in cuda.Source.Name) -> lines

// NewSourceSet indexes the given texts by name.
func NewSourceSet(named map[string]string) SourceSet {
	s := SourceSet{}
	for n, t := range named {
		s[n] = strings.Split(t, "\n")
	}
	return s
}

// line returns the text of file:n (1-based) and the name it resolved to.
func (s SourceSet) line(file string, n int) (string, string, bool) {
	for name, lines := range s {
		if file == name || strings.HasSuffix(file, "/"+name) {
			if n >= 1 && n <= len(lines) {
				return lines[n-1], name, true
			}
			return "", name, false
		}
	}
	return "", "", false
}

var (
	reCallee   = regexp.MustCompile(`\b([A-Za-z_]\w*)\s*\(`)
	reOrdering = regexp.MustCompile(`\bfd_(ld_acquire|ld_relaxed|st_release|st_relaxed|fence|atomic_(?:add|exch|cas|max)(?:_acq_rel)?)_(cta|gpu|sys)\s*\(`)
	// Header lines that become ordering instructions: the macro
	// invocations that stamp out the typed primitives, and the fences.
	reHeaderOrdering = regexp.MustCompile(`^FD_[A-Z]+_\(|^FD_DEV void fd_fence_`)
)

// enclosingFunc finds the function a source line belongs to: the nearest
// line at or above it that starts in column 0 and calls something (the
// sources put every definition's name line in column 0 and indent bodies
// and continuation lines).
func enclosingFunc(lines []string, n int) string {
	for i := min(n, len(lines)) - 1; i >= 0; i-- {
		l := lines[i]
		if l == "" || l[0] == ' ' || l[0] == '\t' || l[0] == '}' || l[0] == '#' || strings.HasPrefix(l, "//") {
			continue
		}
		for _, m := range reCallee.FindAllStringSubmatch(l, -1) {
			switch m[1] {
			case "__launch_bounds__", "__align__", "__attribute__", "__declspec":
				continue
			}
			return m[1]
		}
		return ""
	}
	return ""
}

func isHeader(file string) bool { return filepath.Base(file) == "ferry_device.h" }

// scopeRank orders scopes: a stronger scope satisfies a weaker demand.
func scopeRank(s string) int {
	switch s {
	case "CTA":
		return 1
	case "SM", "VC":
		return 2
	case "GPU":
		return 3
	case "SYS":
		return 4
	}
	return 0
}

// opParts splits "LDG.E.128.STRONG.SYS" into its segments.
func opParts(op string) []string { return strings.Split(op, ".") }

// memAccess reports whether op reads or writes memory other than the
// constant bank, shared memory or local memory (which no flag lives in).
func memAccess(op string) bool {
	base := opParts(op)[0]
	switch base {
	case "LD", "LDG", "ST", "STG", "ATOM", "ATOMG", "RED", "REDG":
		return true
	}
	return false
}

// strongScope is the scope of a .STRONG access ("" when weak).
func strongScope(op string) string {
	p := opParts(op)
	for i, s := range p {
		if s == "STRONG" && i+1 < len(p) {
			return p[i+1]
		}
	}
	// Atomics are strong by nature; their scope is spelled the same way.
	return ""
}

func isNC(op string) bool {
	p := opParts(op)
	if p[0] != "LDG" && p[0] != "LD" {
		return false
	}
	return slices.Contains(p[1:], "CONSTANT") || slices.Contains(p[1:], "NC")
}

func isLoad(op string) bool  { b := opParts(op)[0]; return b == "LD" || b == "LDG" }
func isStore(op string) bool { b := opParts(op)[0]; return b == "ST" || b == "STG" }
func isAtom(op string) bool {
	b := opParts(op)[0]
	return b == "ATOM" || b == "ATOMG" || b == "RED" || b == "REDG"
}

// membarScope is the scope of a MEMBAR/FENCE that orders prior accesses
// (ALL or SC), "" otherwise.
func membarScope(op string) (kind, scope string) {
	p := opParts(op)
	if (p[0] != "MEMBAR" && p[0] != "FENCE") || len(p) < 2 {
		return "", ""
	}
	if len(p) == 2 { // MEMBAR.CTA: no kind spelled
		return "ALL", p[1]
	}
	return p[1], p[len(p)-1]
}

func atLeast(have, want string) bool {
	return scopeRank(have) >= scopeRank(want) && scopeRank(have) > 0
}

type site struct {
	key     string  // the caller chain, formatted
	caller  []Frame // the caller chain
	prim    []Inst  // instructions of the header primitive at this call
	intents [][2]string
}

func chainKey(c []Frame) string {
	var b strings.Builder
	for _, f := range c {
		fmt.Fprintf(&b, "%s:%d<", filepath.Base(f.File), f.Line)
	}
	return b.String()
}

// CheckMemoryModel checks one disassembled function (see the comment at
// the top of this file); src holds the texts its line table names and
// options the compiler options of its build (NCSite.Define is looked
// for there).
func CheckMemoryModel(fn SASSFunction, src SourceSet, options []string) MemCheck {
	mc := MemCheck{Function: fn.Name}
	sites := map[string]*site{}
	var order []string
	hasLines := false
	for _, in := range fn.Insts {
		if len(in.Loc) == 0 {
			continue
		}
		hasLines = true
		inner := in.Loc[0]
		if isHeader(inner.File) && len(in.Loc) > 1 {
			text, _, ok := src.line(inner.File, inner.Line)
			if ok && reHeaderOrdering.MatchString(text) {
				k := chainKey(in.Loc[1:])
				s := sites[k]
				if s == nil {
					s = &site{key: k, caller: in.Loc[1:]}
					sites[k] = s
					order = append(order, k)
				}
				s.prim = append(s.prim, in)
			}
		}
	}
	if !hasLines {
		mc.Problems = append(mc.Problems, fn.Name+": no line table (compile with -lineinfo)")
		return mc
	}
	for _, k := range order {
		s := sites[k]
		text, name, ok := src.line(s.caller[0].File, s.caller[0].Line)
		where := fmt.Sprintf("%s: %s:%d", fn.Name, name, s.caller[0].Line)
		if !ok {
			mc.Problems = append(mc.Problems, fmt.Sprintf("%s: no source for %s:%d", fn.Name, s.caller[0].File, s.caller[0].Line))
			continue
		}
		for _, m := range reOrdering.FindAllStringSubmatch(text, -1) {
			s.intents = append(s.intents, [2]string{m[1], strings.ToUpper(m[2])})
		}
		if len(s.intents) == 0 {
			mc.Problems = append(mc.Problems, fmt.Sprintf("%s: ordering instructions from ferry_device.h, but the line names no fd_ ordering primitive: %q",
				where, strings.TrimSpace(text)))
			continue
		}
		mc.Problems = append(mc.Problems, checkSite(s, fn, where, &mc.Sites)...)
	}
	p, n := checkNC(fn, src, options)
	mc.Problems = append(mc.Problems, p...)
	mc.Sites.NCLoads = n
	return mc
}

// checkSite holds one call line's SASS to what the line names. The
// barrier halves of acquire and release are looked for in the function's
// instruction stream next to the access (ptxas files them under the
// header's line or the caller's, and a fence just before a release store
// may stand in for the store's own MEMBAR), within the same basic block:
// after an acquire load, CCTL.IVALL before any other global access,
// branch or label; before a release store, a MEMBAR after any other global
// access and within the block.
func checkSite(s *site, fn SASSFunction, where string, count *MemSites) []string {
	var p []string
	bad := func(f string, a ...any) { p = append(p, where+": "+fmt.Sprintf(f, a...)) }
	// No access made by the primitive is weaker than the weakest scope the
	// line asks of that kind of access (a line may also inline helpers
	// whose own frames the line table dropped, so loads are held only to
	// load primitives, stores to store primitives).
	weakest := map[string]string{}
	for _, it := range s.intents {
		for _, k := range accessKinds(it[0]) {
			if w, ok := weakest[k]; !ok || scopeRank(it[1]) < scopeRank(w) {
				weakest[k] = it[1]
			}
		}
	}
	for _, in := range s.prim {
		if !memAccess(in.Op) {
			continue
		}
		if w, ok := weakest[accessKind(in.Op)]; ok && !atLeast(strongScope(in.Op), w) {
			bad("%s at %#x is not strong at %s scope (or wider)", in.Op, in.Addr, w)
		}
	}
	for _, it := range s.intents {
		kind, scope := it[0], it[1]
		if scope == "CTA" {
			continue // block-local ordering: not a flag protocol
		}
		var acc []Inst
		want := map[string]func(string) bool{"ld": isLoad, "st": isStore, "rmw": isAtom}[accessKinds(kind)[0]]
		for _, in := range s.prim {
			if want != nil && want(in.Op) && atLeast(strongScope(in.Op), scope) {
				acc = append(acc, in)
			}
		}
		name := "fd_" + kind + "_" + strings.ToLower(scope)
		if len(acc) == 0 && kind != "fence" {
			bad("%s: no access strong at %s scope (or wider) in the SASS", name, scope)
			continue
		}
		switch {
		case kind == "ld_acquire":
			count.Acquire++
			for _, in := range acc {
				if !cctlAfter(fn, in.Addr) {
					bad("%s: %s at %#x has no CCTL.IVALL after it in its block", name, in.Op, in.Addr)
				}
			}
		case kind == "st_release":
			count.Release++
			for _, in := range acc {
				if !membarBefore(fn, in.Addr, scope) {
					bad("%s: %s at %#x has no MEMBAR at %s scope (or wider) before it in its block", name, in.Op, in.Addr, scope)
				}
			}
		case kind == "fence":
			count.Fence++
			found := false
			for _, in := range s.prim {
				if k, sc := membarScope(in.Op); k == "SC" && atLeast(sc, scope) {
					found = true
				}
			}
			if !found {
				bad("%s: no MEMBAR.SC at %s scope (or wider)", name, scope)
			}
		case strings.HasSuffix(kind, "_acq_rel"):
			count.AcqRelRMW++
			for _, in := range acc {
				if !membarBefore(fn, in.Addr, scope) {
					bad("%s: %s at %#x has no MEMBAR at %s scope (or wider) before it in its block", name, in.Op, in.Addr, scope)
				}
				if !cctlAfter(fn, in.Addr) {
					bad("%s: %s at %#x has no CCTL.IVALL after it in its block", name, in.Op, in.Addr)
				}
			}
		default: // relaxed loads, stores and atomics: strong is all they need
			count.Relaxed++
		}
	}
	return p
}

// accessKinds: the kinds of access an ordering primitive makes.
func accessKinds(kind string) []string {
	switch {
	case strings.HasPrefix(kind, "ld_"):
		return []string{"ld"}
	case strings.HasPrefix(kind, "st_"):
		return []string{"st"}
	case kind == "fence":
		return []string{"fence"}
	}
	return []string{"rmw"}
}

func accessKind(op string) string {
	switch {
	case isLoad(op):
		return "ld"
	case isStore(op):
		return "st"
	}
	return "rmw"
}

func isCCTLIVAll(op string) bool { return op == "CCTL.IVALL" }

func isControl(op string) bool {
	switch opParts(op)[0] {
	case "BRA", "BRX", "JMP", "JMX", "EXIT", "RET", "CALL":
		return true
	}
	return false
}

// blockWindow bounds the scans: a barrier further than this from its
// access is not taken as belonging to it.
const blockWindow = 24

func indexOf(fn SASSFunction, addr int) int {
	return sort.Search(len(fn.Insts), func(i int) bool { return fn.Insts[i].Addr >= addr })
}

// cctlAfter: a CCTL.IVALL follows the access at addr before any weak
// global load (which could hit a stale L1 line), branch or label. Strong
// loads (they go past L1), stores and atomics may stand between: ptxas
// issues one invalidation for back-to-back acquires.
func cctlAfter(fn SASSFunction, addr int) bool {
	i := indexOf(fn, addr)
	for j := i + 1; j < len(fn.Insts) && j <= i+blockWindow; j++ {
		in := fn.Insts[j]
		if in.Target {
			return false
		}
		if isCCTLIVAll(in.Op) {
			return true
		}
		if (isLoad(in.Op) && strongScope(in.Op) == "") || isControl(in.Op) {
			return false
		}
	}
	return false
}

// membarBefore: a MEMBAR.ALL or MEMBAR.SC at scope or wider precedes the
// access at addr, in the same block, with no global access between them
// other than strong stores and atomics at scope or wider (ptxas issues
// one MEMBAR for back-to-back releases).
func membarBefore(fn SASSFunction, addr int, scope string) bool {
	i := indexOf(fn, addr)
	if i < len(fn.Insts) && fn.Insts[i].Target {
		return false
	}
	for j := i - 1; j >= 0 && j >= i-blockWindow; j-- {
		in := fn.Insts[j]
		if k, sc := membarScope(in.Op); (k == "ALL" || k == "SC") && atLeast(sc, scope) {
			return true
		}
		chained := (isStore(in.Op) || isAtom(in.Op)) && atLeast(strongScope(in.Op), scope)
		if (memAccess(in.Op) && !chained) || isControl(in.Op) || in.Target {
			return false
		}
	}
	return false
}

// checkNC finds every non-coherent load and holds it to NCAllowed.
func checkNC(fn SASSFunction, src SourceSet, options []string) (problems []string, n int) {
	seen := map[string]bool{}
	for _, in := range fn.Insts {
		if !isNC(in.Op) {
			continue
		}
		n++
		loc := in.Loc
		if len(loc) > 1 && isHeader(loc[0].File) {
			loc = loc[1:] // fd_ld16_nc: the caller's line decides
		}
		fnName, file := "?", "?"
		if len(loc) > 0 {
			if _, name, ok := src.line(loc[0].File, loc[0].Line); ok {
				file = fmt.Sprintf("%s:%d", name, loc[0].Line)
				fnName = enclosingFunc(src[name], loc[0].Line)
			} else {
				file = fmt.Sprintf("%s:%d", loc[0].File, loc[0].Line)
			}
		}
		i := slices.IndexFunc(NCAllowed, func(a NCSite) bool { return a.Kernel == fn.Name && a.Func == fnName })
		key := fnName + "@" + file
		if seen[key] {
			continue
		}
		seen[key] = true
		if i < 0 {
			problems = append(problems, fmt.Sprintf("%s: %s at %#x (%s, in %s): a non-coherent load where NCAllowed lists none",
				fn.Name, in.Op, in.Addr, file, fnName))
			continue
		}
		if d := NCAllowed[i].Define; d != "" && !defines(options, d) {
			problems = append(problems, fmt.Sprintf("%s: %s at %#x (%s, in %s): a non-coherent load of memory written during the launch in a build without -D%s",
				fn.Name, in.Op, in.Addr, file, fnName, d))
		}
	}
	return problems, n
}

// defines reports whether options define the macro name (-DNAME or
// -DNAME=value).
func defines(options []string, name string) bool {
	for _, o := range options {
		if o == "-D"+name || strings.HasPrefix(o, "-D"+name+"=") {
			return true
		}
	}
	return false
}
