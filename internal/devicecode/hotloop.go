package devicecode

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
	fam := map[string]int{}
	var seq []byte
	n := 0
	for _, i := range fn.Insts {
		hit := false
		for _, f := range i.Loc {
			if in(f) {
				hit = true
				break
			}
		}
		if !hit {
			continue
		}
		n++
		base := opParts(i.Op)[0]
		c := byte(0)
		switch {
		case (base == "LDG" || base == "LD") && !strings.HasPrefix(i.Op, "LDC"):
			c = 'L'
			fam[i.Op]++
		case base == "STG" || base == "ST":
			c = 'S'
			fam[i.Op]++
		case strings.HasPrefix(base, "F") && (strings.Contains(base, "ADD") || strings.Contains(base, "MUL") || strings.Contains(base, "FMA")),
			strings.HasPrefix(base, "H") && (strings.Contains(base, "ADD") || strings.Contains(base, "MUL") || strings.Contains(base, "FMA")):
			c = 'F'
			fam[base]++
		case base == "BRA" || base == "BRX" || base == "JMP":
			c = 'B'
			fam[base]++
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
