package a2a

// Limits a Config must respect. They keep every row index below 2^31 (the
// planner and the GPU metadata use 32-bit rows) and every size sane; none of
// them is a limit of the algorithm the way the reference's E <= 512 (a
// one-block prefix sum) and Hs*16 <= row bytes (scales copied inside the
// token loop) were: the planner is plain Go and scales are copied on their
// own.
const (
	MaxWorldSize      = 4096
	MaxNICsPerGPU     = 4
	MaxTokensPerRank  = 1 << 20
	MaxHidden         = 1 << 20
	MaxExperts        = 1 << 16
	MaxExpertsPerTok  = 256
	MaxExpertPadding  = 1 << 16
	MaxPrivateTokens  = 1 << 24
	maxRows           = 1<<31 - 1
	maxBufferBytes    = 1 << 40
	defaultImmBase    = 0x80000000
	bufferAlign       = 4096
	rowAlign          = 16
	privateNumerator  = 12 // the default window is 1.2x the mean load,
	privateDenominato = 10 // computed exactly in integers
)

// NoPrivateWindow, as Config.PrivateTokens, asks for no private window at
// all (M = 0): every copy then waits for the count exchange. The zero value
// of PrivateTokens means the default size instead.
const NoPrivateWindow = -1

// Config describes one rank's view of an expert-parallel all-to-all. It is
// plain data (a Spec): validating it touches nothing, and every rank of a
// world must use the same Config apart from Rank.
//
// Zero values that have an obvious meaning get it: NVLinkSize, ReplicaSize,
// NICsPerGPU and ExpertPadding of 0 mean 1, PrivateTokens 0 means the
// default window, ImmBase 0 means 0x80000000. Everything else must be set.
type Config struct {
	WorldSize int // W: ranks (GPUs, or host processes) in the world
	Rank      int // this rank, 0 <= Rank < WorldSize

	// NVLinkSize (S) is the number of consecutive ranks that can load and
	// store each other's buffers (an NVLink domain, or processes on one
	// host sharing memory). It must divide WorldSize.
	NVLinkSize int
	// ReplicaSize (D) is the number of consecutive ranks that hold the same
	// tokens (attention tensor-parallel replicas; the reference calls it
	// dp_size). It must divide NVLinkSize, so replicas share a domain.
	ReplicaSize int
	// NICsPerGPU is the number of NICs each rank aggregates; overflow and
	// combine writes are split in that many byte slices.
	NICsPerGPU int

	MaxTokens    int   // T: most tokens a rank passes to one dispatch
	Hidden       int   // H: elements per token
	Scales       int   // Hs: float32 scales per token (0: none)
	DispatchType DType // element type of dispatched tokens (FP8, BF16, FP16, FP32)
	CombineType  DType // element type of expert outputs and of combine results

	Experts         int // E: experts in the world; rank r owns [r*L, (r+1)*L), L = ceil(E/W)
	ExpertsPerToken int // K: top-k; the K experts of one token must differ
	// ExpertPadding aligns each local expert's segment of the dispatch
	// output to a multiple of this many rows.
	ExpertPadding int
	// PrivateTokens (M) is the size of the window each source group owns in
	// every receiver's buffer: that many copies per (group, receiver) are
	// sent before the counts are known. 0 means the default
	// floor(ceil(T*K/E) * 1.2) * L; NoPrivateWindow means none.
	PrivateTokens int
	// MaxTokensPerExpert (B), when not 0, selects the batched output
	// layout: the dispatch output and the expert outputs of combine are
	// [L, B] rows (local expert i's copies at rows [i*B, i*B+count))
	// instead of one padded array, and ExpertPadding is not used. A
	// dispatch that routes more than B copies to one expert fails on every
	// rank with ErrExpertOverflow (nothing is silently dropped).
	MaxTokensPerExpert int

	// ImmBase is the first of the NumTags*ImmBanks immediate values the
	// context uses (see Tag and Layout.Imm); contexts sharing an engine
	// need disjoint ranges.
	ImmBase uint32
}

func orOne(v int) int {
	if v == 0 {
		return 1
	}
	return v
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func roundUp(a, b int) int { return ceilDiv(a, b) * b }

// normalized returns c with its zero-means-default fields filled in.
func (c Config) normalized() Config {
	c.NVLinkSize = orOne(c.NVLinkSize)
	c.ReplicaSize = orOne(c.ReplicaSize)
	c.NICsPerGPU = orOne(c.NICsPerGPU)
	c.ExpertPadding = orOne(c.ExpertPadding)
	if c.ImmBase == 0 {
		c.ImmBase = defaultImmBase
	}
	return c
}

// Validate reports the first problem with c as a *ConfigError (errors.Is
// ErrInvalidConfig), or nil.
func (c Config) Validate() error {
	_, err := c.Layout()
	return err
}

func checkRange(field string, v, lo, hi int) error {
	if v < lo || v > hi {
		return cfgErr(field, int64(v), "must be in [%d, %d]", lo, hi)
	}
	return nil
}

func (c Config) check() error {
	for _, r := range []struct {
		field     string
		v, lo, hi int
	}{
		{"WorldSize", c.WorldSize, 1, MaxWorldSize},
		{"Rank", c.Rank, 0, c.WorldSize - 1},
		{"NVLinkSize", c.NVLinkSize, 1, c.WorldSize},
		{"ReplicaSize", c.ReplicaSize, 1, c.NVLinkSize},
		{"NICsPerGPU", c.NICsPerGPU, 1, MaxNICsPerGPU},
		{"MaxTokens", c.MaxTokens, 1, MaxTokensPerRank},
		{"Hidden", c.Hidden, 1, MaxHidden},
		{"Scales", c.Scales, 0, c.Hidden},
		{"Experts", c.Experts, 1, MaxExperts},
		{"ExpertsPerToken", c.ExpertsPerToken, 1, min(c.Experts, MaxExpertsPerTok)},
		{"ExpertPadding", c.ExpertPadding, 1, MaxExpertPadding},
		{"PrivateTokens", c.PrivateTokens, NoPrivateWindow, MaxPrivateTokens},
		{"MaxTokensPerExpert", c.MaxTokensPerExpert, 0, maxRows},
	} {
		if err := checkRange(r.field, r.v, r.lo, r.hi); err != nil {
			return err
		}
	}
	if c.WorldSize%c.NVLinkSize != 0 {
		return cfgErr("NVLinkSize", int64(c.NVLinkSize), "must divide WorldSize %d", c.WorldSize)
	}
	if c.NVLinkSize%c.ReplicaSize != 0 {
		return cfgErr("ReplicaSize", int64(c.ReplicaSize), "must divide NVLinkSize %d (replicas share a domain)", c.NVLinkSize)
	}
	if !c.DispatchType.Valid() {
		return cfgErr("DispatchType", int64(c.DispatchType), "must be FP8, BF16, FP16 or FP32")
	}
	if !c.CombineType.CombineCapable() {
		return cfgErr("CombineType", int64(c.CombineType), "must be BF16, FP16 or FP32")
	}
	if c.ImmBase > ^uint32(0)-uint32(NumTags*ImmBanks)+1 {
		return cfgErr("ImmBase", int64(c.ImmBase), "leaves no room for %d banks of %d tags", ImmBanks, NumTags)
	}
	return nil
}
