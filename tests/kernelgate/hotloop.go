package kernelgate

import (
	"fmt"
	"sort"
	"strings"
)

// HotLoopMix summarises the SASS that fn holds for the source function
// srcFunc (every instruction with a frame in it, through inlining): the
// count of each opcode family, and the order of global loads (L), floating
// point arithmetic (F), stores (S) and branches (B) in address order,
// run-length coded ("L8 F32 S1" is eight loads issued back to back before
// any arithmetic).
func HotLoopMix(fn SASSFunction, src SourceSet, srcFunc string) string {
	insts := hotInsts(fn, src, srcFunc)
	fam := map[string]int{}
	var seq []byte
	n := len(insts)
	for _, i := range insts {
		c := hotClass(i.Op)
		switch c {
		case 'L', 'S':
			fam[i.Op]++
		case 'F', 'B':
			fam[opParts(i.Op)[0]]++
		default:
			fam["other"]++
		}
		if c != 0 {
			seq = append(seq, c)
		}
	}
	if n == 0 {
		return "no instruction from " + srcFunc
	}
	var runs []string
	for i := 0; i < len(seq); {
		j := i
		for j < len(seq) && seq[j] == seq[i] {
			j++
		}
		runs = append(runs, fmt.Sprintf("%c%d", seq[i], j-i))
		i = j
	}
	var fams []string
	for k, v := range fam {
		fams = append(fams, fmt.Sprintf("%s x%d", k, v))
	}
	sort.Strings(fams)
	return fmt.Sprintf("%d instructions from %s: %s; order: %s", n, srcFunc, strings.Join(fams, ", "), strings.Join(runs, " "))
}

// WideLoadsFirst counts the 16-byte global loads (opcodes with .128) of
// srcFunc in fn, and how many of them come before its first floating
// point arithmetic in address order: equal counts mean every such load
// is issued before any sum waits on one.
func WideLoadsFirst(fn SASSFunction, src SourceSet, srcFunc string) (before, total int) {
	arith := false
	for _, i := range hotInsts(fn, src, srcFunc) {
		switch c := hotClass(i.Op); {
		case c == 'F':
			arith = true
		case c == 'L' && strings.Contains(i.Op, ".128"):
			total++
			if !arith {
				before++
			}
		}
	}
	return before, total
}

// hotInsts returns the instructions of fn with a frame in the source
// function srcFunc (through inlining), in address order.
func hotInsts(fn SASSFunction, src SourceSet, srcFunc string) []Inst {
	type key struct {
		file string
		line int
	}
	memo := map[key]bool{}
	in := func(f Frame) bool {
		k := key{f.File, f.Line}
		if v, ok := memo[k]; ok {
			return v
		}
		v := false
		if _, name, ok := src.line(f.File, f.Line); ok {
			v = enclosingFunc(src[name], f.Line) == srcFunc
		}
		memo[k] = v
		return v
	}
	var out []Inst
	for _, i := range fn.Insts {
		for _, f := range i.Loc {
			if in(f) {
				out = append(out, i)
				break
			}
		}
	}
	return out
}

// hotClass classes an opcode for HotLoopMix: L global load, S store, F
// floating point add/multiply, B branch, 0 anything else.
func hotClass(op string) byte {
	base := opParts(op)[0]
	arith := strings.Contains(base, "ADD") || strings.Contains(base, "MUL") || strings.Contains(base, "FMA")
	switch {
	case (base == "LDG" || base == "LD") && !strings.HasPrefix(op, "LDC"):
		return 'L'
	case base == "STG" || base == "ST":
		return 'S'
	case (strings.HasPrefix(base, "F") || strings.HasPrefix(base, "H")) && arith:
		return 'F'
	case base == "BRA" || base == "BRX" || base == "JMP":
		return 'B'
	}
	return 0
}
