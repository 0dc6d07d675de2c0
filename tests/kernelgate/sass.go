package kernelgate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Frame is one source position of an instruction: the innermost frame
// first, then the lines it was inlined at.
type Frame struct {
	File string // as the compiler recorded it (NVRTC prefixes its working directory)
	Line int
}

// Inst is one SASS instruction with the source position -lineinfo gave
// it.
type Inst struct {
	Addr int
	Pred string // "@P0", "@!P1" or ""
	Op   string // opcode with its modifiers: "LDG.E.STRONG.SYS"
	Args string
	Loc  []Frame // innermost first; empty when the cubin has no line table here
	// Target: a label precedes the instruction (a branch may land here).
	Target bool
}

// SASSFunction is one function (a kernel, or a non-inlined callee) of a
// disassembled cubin.
type SASSFunction struct {
	Name  string
	Insts []Inst
}

// NVDisasm is an nvdisasm binary and the CUDA release it belongs to.
type NVDisasm struct {
	Path         string
	Major, Minor int
}

var reRelease = regexp.MustCompile(`release (\d+)\.(\d+)`)

// NewNVDisasm checks that path runs and reads its release.
func NewNVDisasm(path string) (NVDisasm, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil {
		return NVDisasm{}, fmt.Errorf("run %s --version: %w (%s)", path, err, strings.TrimSpace(string(out)))
	}
	m := reRelease.FindStringSubmatch(string(out))
	if m == nil {
		return NVDisasm{}, fmt.Errorf("%s --version: no release in %q", path, out)
	}
	maj, _ := strconv.Atoi(m[1])
	mnr, _ := strconv.Atoi(m[2])
	return NVDisasm{Path: path, Major: maj, Minor: mnr}, nil
}

func (d NVDisasm) String() string { return fmt.Sprintf("nvdisasm %d.%d", d.Major, d.Minor) }

// Disassemble runs nvdisasm with the line table printed through inlining
// (-gi) over cubin and parses every function. The text is kept in the
// gate's cache (FERRY_GATE_CACHE), keyed by the cubin and the nvdisasm
// binary.
func (d NVDisasm) Disassemble(cubin []byte) ([]SASSFunction, error) {
	text, err := disassembleCached(d, cubin)
	if err != nil {
		return nil, err
	}
	fns := parseSASS(text)
	if len(fns) == 0 {
		return nil, fmt.Errorf("disassemble with %s: no function in its output", filepath.Base(d.Path))
	}
	return fns, nil
}

func (d NVDisasm) run(cubin []byte) (string, error) {
	f, err := os.CreateTemp("", "ferry-gate-*.cubin")
	if err != nil {
		return "", fmt.Errorf("disassemble: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(cubin); err != nil {
		f.Close()
		return "", fmt.Errorf("disassemble: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("disassemble: %w", err)
	}
	// Some cubins (NVRTC 11.8's sm_90 a2a_dispatch builds) send nvdisasm's
	// -gi line-table walk into tens of GiB and minutes: bound its address
	// space and its time so such a cubin fails fast, as ErrDisasmLimit,
	// instead of taking the machine's memory.
	ctx, cancel := context.WithTimeout(context.Background(), disasmTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", `ulimit -v `+strconv.Itoa(disasmMemKiB)+` && exec "$0" "$@"`, d.Path, "-c", "-gi", f.Name())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if ctx.Err() != nil || strings.Contains(msg, "Memory allocation failure") {
			err = fmt.Errorf("%w (%d MiB, %s): %v", ErrDisasmLimit, disasmMemKiB>>10, disasmTimeout, err)
		}
		return "", fmt.Errorf("disassemble with %s: %w: %s", filepath.Base(d.Path), err, msg)
	}
	return string(out), nil
}

// ErrDisasmLimit: nvdisasm exceeded the memory or time the gate gives it.
var ErrDisasmLimit = errors.New("nvdisasm exceeded its limits")

const (
	disasmMemKiB  = 6 << 20 // 6 GiB of address space
	disasmTimeout = 3 * time.Minute
)

var (
	reSection = regexp.MustCompile(`^\s*\.section\s+\.text\.([^,\s]+)`)
	reLineTab = regexp.MustCompile(`^\s*//## File "([^"]*)", line (\d+)(.*)$`)
	reInlined = regexp.MustCompile(`inlined at "([^"]*)", line (\d+)`)
	reLabel   = regexp.MustCompile(`^\s*\.L_x_\d+:\s*$`)
	reInst    = regexp.MustCompile(`^\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)\s*(.*?)\s*;?\s*$`)
)

// parseSASS reads nvdisasm -c -gi output. A "//## File" comment sets the
// position of the instructions after it; of several in a row, the one
// with the longest inline chain is kept (nvdisasm prints the chain and
// then the outermost position alone).
func parseSASS(text string) []SASSFunction {
	var fns []SASSFunction
	var cur *SASSFunction
	var loc []Frame
	prevComment, label := false, false
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := reSection.FindStringSubmatch(line); m != nil {
			fns = append(fns, SASSFunction{Name: m[1]})
			cur = &fns[len(fns)-1]
			loc, prevComment, label = nil, false, false
			continue
		}
		if reLabel.MatchString(line) {
			label = true
			continue
		}
		if m := reLineTab.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[2])
			chain := []Frame{{File: m[1], Line: n}}
			for _, in := range reInlined.FindAllStringSubmatch(m[3], -1) {
				k, _ := strconv.Atoi(in[2])
				chain = append(chain, Frame{File: in[1], Line: k})
			}
			if !prevComment || len(chain) > len(loc) {
				loc = chain
			}
			prevComment = true
			continue
		}
		if cur == nil {
			continue
		}
		m := reInst.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		prevComment = false
		addr, _ := strconv.ParseInt(m[1], 16, 64)
		cur.Insts = append(cur.Insts, Inst{Addr: int(addr), Pred: strings.TrimSpace(m[2]), Op: m[3],
			Args: strings.TrimSuffix(strings.TrimSpace(m[4]), " ;"), Loc: loc, Target: label})
		label = false
	}
	return fns
}
