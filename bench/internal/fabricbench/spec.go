package fabricbench

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ferryrdma/ferry/bench/internal/report"
	"github.com/ferryrdma/ferry/fabric"
)

// Errors. Every error this package returns wraps one of them or an
// engine sentinel (fabric.ErrInvalidArgument for bad specs).
var (
	// ErrVerify is a verified case whose bytes or immediates did not
	// arrive as written.
	ErrVerify = errors.New("verification failed")
	// ErrRemote is an error the peer reported over the control channel.
	ErrRemote = errors.New("peer reported an error")
)

// Workload names.
const (
	Paged  = "paged"
	Single = "single"
	Imm    = "imm"
)

// ImmValue is the immediate of the imm workload, as in the reference tool.
const ImmValue = 20250501

// Layout constants shared with the reference so figures compare: every
// write lands at Offset, paged writes use a stride PageGap bytes larger
// than the page.
const (
	Offset  = 1024
	PageGap = 128
)

// Spec is a benchmark run: plain data, filled from flags, compared and
// printed; nothing here touches the machine.
type Spec struct {
	// Provider is the transport ("shm", "tcp;ofi_rxm", "mem", "null",
	// "verbs", "efa", "auto").
	Provider string
	// Node pins the provider's address (tcp: "127.0.0.1").
	Node string
	// NICs is the domain count of the host group (1 to fabric.MaxNICs).
	NICs int
	// TargetNICs, in loopback, is the receiving engine's domain count
	// (0: NICs); the writer shards over the NICs of both (see
	// fabric.ExpectedImms).
	TargetNICs int
	// Poll is the workers' polling policy.
	Poll fabric.PollMode
	// GPUs lists GPU ordinals (the CUDA driver's): each side's engine has
	// a group per GPU, and its registered buffers are GPU memory of the
	// first one, registered through fabric/gpu (dma-buf when the kernel,
	// driver and NIC allow it, else by address). Needs the CUDA driver.
	GPUs []int
	// GPUPlacement is PlaceTopology (default) or PlaceFirstNICs.
	GPUPlacement string
	// Workloads to run, in this order (Paged, Single, Imm).
	Workloads []string
	// Sizes overrides the message sizes of the paged and single workloads
	// (and drops the reference's 10000 B cases); Pages overrides the page
	// counts.
	Sizes []uint64
	Pages []int
	// Iters and Warmup: 0 picks per case, fewer for large cases so a run
	// stays short.
	Iters, Warmup int
	// Verify checks every case: after the timed iterations of a write
	// case, the writer runs it once more with an immediate on every write,
	// and the target counts those immediates and compares every byte with
	// the seeded pattern; every immediate of the imm case is counted.
	Verify bool
	// Buffer is each side's registered buffer (default 256 MiB).
	Buffer uint64
	// Seed seeds page indices and fill patterns.
	Seed uint64
	// Timeout bounds one case (default 120 s).
	Timeout time.Duration
	// Corrupt, when set, sees the received bytes of a verified case just
	// before they are checked: tests use it to force a failure.
	Corrupt func(dst []byte) `json:"-"`
	// Logger and LogLevel are the engines' (fabric.Config): nil logs
	// warnings and errors to slog.Default's handler.
	Logger   *slog.Logger `json:"-"`
	LogLevel slog.Leveler `json:"-"`
	// OnEngine, when set, hears of every engine the run opens and its
	// role ("server", "client", "rank"): fabric-debug --metrics exports
	// their counters.
	OnEngine func(e *fabric.Engine, role string) `json:"-"`
	// CloseTimeout bounds each engine's Close (0: 30 s).
	CloseTimeout time.Duration `json:"-"`
}

// DefaultBuffer is the reference tool's buffer size.
const DefaultBuffer = 256 << 20

// Case is one row of the table.
type Case struct {
	Workload string `json:"workload"`
	Bytes    uint64 `json:"bytes"` // page or message size
	Pages    int    `json:"pages"` // 0 for single and imm
	Iters    int    `json:"iters"`
	Warmup   int    `json:"warmup"`
	// Verify checks the case (see Spec.Verify).
	Verify bool `json:"verify"`
}

// Total is the payload bytes of one iteration.
func (c Case) Total() uint64 {
	if c.Pages > 0 {
		return c.Bytes * uint64(c.Pages)
	}
	return c.Bytes
}

// Ops is the writes of one iteration (per NIC shards not counted).
func (c Case) Ops() int { return max(c.Pages, 1) }

// WithDefaults returns s with empty fields filled in.
func (s Spec) WithDefaults() Spec {
	if s.Provider == "" {
		s.Provider = "shm"
	}
	if s.Node == "" && strings.Contains(s.Provider, "tcp") {
		s.Node = "127.0.0.1"
	}
	if s.NICs == 0 {
		s.NICs = 1
	}
	if len(s.Workloads) == 0 {
		s.Workloads = []string{Paged, Single, Imm}
	}
	if s.Buffer == 0 {
		s.Buffer = DefaultBuffer
	}
	if s.Seed == 0 {
		s.Seed = 0x123
	}
	if s.Timeout == 0 {
		s.Timeout = 120 * time.Second
	}
	return s
}

// Validate checks s (after WithDefaults). Bad input wraps
// fabric.ErrInvalidArgument.
func (s Spec) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf(format+": %w", append(args, fabric.ErrInvalidArgument)...)
	}
	for _, g := range s.GPUs {
		if g < 0 {
			return bad("gpu %d", g)
		}
	}
	if s.GPUPlacement != "" && s.GPUPlacement != PlaceTopology && s.GPUPlacement != PlaceFirstNICs {
		return bad("gpu placement %q (want %s or %s)", s.GPUPlacement, PlaceTopology, PlaceFirstNICs)
	}
	if s.NICs < 1 || s.NICs > fabric.MaxNICs {
		return bad("%d nics (1 to %d)", s.NICs, fabric.MaxNICs)
	}
	if s.TargetNICs < 0 || s.TargetNICs > fabric.MaxNICs {
		return bad("%d target nics (1 to %d)", s.TargetNICs, fabric.MaxNICs)
	}
	for _, w := range s.Workloads {
		if w != Paged && w != Single && w != Imm {
			return bad("workload %q (want paged, single or imm)", w)
		}
	}
	if s.Iters < 0 || s.Warmup < 0 || s.Timeout < 0 {
		return bad("iters %d, warmup %d, timeout %v", s.Iters, s.Warmup, s.Timeout)
	}
	if s.Buffer < 1<<20 || s.Buffer > 16<<30 {
		return bad("buffer of %d bytes (1 MiB to 16 GiB)", s.Buffer)
	}
	for _, n := range s.Sizes {
		if n == 0 || n+Offset > s.Buffer {
			return bad("size %d does not fit a %d-byte buffer after offset %d", n, s.Buffer, Offset)
		}
	}
	for _, p := range s.Pages {
		if p < 1 || p > 1<<20 {
			return bad("%d pages (1 to %d)", p, 1<<20)
		}
	}
	return nil
}

// Cases lists the cases of s in run order: the reference's set (its
// 10000 B cases first), or Sizes and Pages in place of its sizes and page
// counts. Every case is checked when s.Verify is set.
func (s Spec) Cases() []Case {
	var out []Case
	add := func(c Case) {
		c.Iters, c.Warmup = s.iterations(c)
		c.Verify = s.Verify
		out = append(out, c)
	}
	pageSizes := []uint64{1 << 10, 4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10}
	singleSizes := make([]uint64, 0, 17)
	for n := uint64(1 << 10); n <= 64<<20; n <<= 1 {
		singleSizes = append(singleSizes, n)
	}
	reference := len(s.Sizes) == 0
	if !reference {
		pageSizes, singleSizes = s.Sizes, s.Sizes
	}
	pageCounts := []int{10000, 100}
	if len(s.Pages) > 0 {
		pageCounts = s.Pages
	}
	for _, w := range s.Workloads {
		switch w {
		case Paged:
			if reference {
				add(Case{Workload: Paged, Bytes: 10000, Pages: 200})
			}
			for _, p := range pageCounts {
				for _, n := range pageSizes {
					add(Case{Workload: Paged, Bytes: n, Pages: p})
				}
			}
		case Single:
			if reference {
				add(Case{Workload: Single, Bytes: 10000})
			}
			for _, n := range singleSizes {
				if n+Offset <= s.Buffer {
					add(Case{Workload: Single, Bytes: n})
				}
			}
		case Imm:
			add(Case{Workload: Imm})
		}
	}
	return out
}

// iterations picks the counts for c: the reference's 100 timed and 50
// warmup iterations where an iteration is small, fewer where it moves
// much data, so the default run stays within seconds on a small machine.
func (s Spec) iterations(c Case) (iters, warmup int) {
	iters, warmup = s.Iters, s.Warmup
	if iters == 0 {
		const budget = 128 << 20 // payload bytes per case
		iters = 100
		if t := c.Total(); t > 0 {
			iters = int(min(100, max(3, budget/t)))
		}
	}
	if s.Warmup == 0 && s.Iters == 0 {
		warmup = min(50, max(1, iters/2))
	}
	return iters, warmup
}

// ParseSizes parses a comma list of sizes with optional K, M, G suffixes
// (powers of 1024): "64,4K,64M".
func ParseSizes(v string) ([]uint64, error) {
	var out []uint64
	for _, f := range splitList(v) {
		num := strings.ToUpper(f)
		// Accept 4K, 4KB, 4KiB and 100B alike.
		if t, ok := strings.CutSuffix(num, "IB"); ok {
			num = t
		} else if t, ok := strings.CutSuffix(num, "B"); ok {
			num = t
		}
		mult := uint64(1)
		if k := strings.IndexAny(num, "KMG"); k >= 0 && k == len(num)-1 {
			mult = map[byte]uint64{'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}[num[k]]
			num = num[:k]
		}
		n, err := strconv.ParseUint(num, 10, 64)
		if err != nil || n == 0 || n > (1<<40)/mult {
			return nil, fmt.Errorf("size %q: %w", f, fabric.ErrInvalidArgument)
		}
		out = append(out, n*mult)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("size list %q is empty: %w", v, fabric.ErrInvalidArgument)
	}
	return out, nil
}

// ParseInts parses a comma list of non-negative integers.
func ParseInts(v string) ([]int, error) {
	var out []int
	for _, f := range splitList(v) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("number %q: %w", f, fabric.ErrInvalidArgument)
		}
		out = append(out, n)
	}
	return out, nil
}

// ParseWorkloads parses "single,paged,imm" (or "all").
func ParseWorkloads(v string) ([]string, error) {
	var out []string
	for _, f := range splitList(v) {
		f = strings.ToLower(f)
		switch f {
		case "all":
			out = append(out, Paged, Single, Imm)
		case Paged, Single, Imm:
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		default:
			return nil, fmt.Errorf("workload %q (want paged, single, imm or all): %w", f, fabric.ErrInvalidArgument)
		}
	}
	return out, nil
}

func splitList(v string) []string {
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// FormatBytes prints n the way the table does: "64 KiB", "10000 B".
func FormatBytes(n uint64) string { return report.Bytes(n) }
