package a2abench

import "time"

// Report describes the run and holds its cases. Every rank gets every
// rank's samples.
type Report struct {
	WorldSize int    `json:"world_size"`
	NVLink    int    `json:"nvlink"`
	Replicas  int    `json:"dp"`
	NICs      int    `json:"nets_per_gpu"`
	MaxTokens int    `json:"max_tokens"`
	Hidden    int    `json:"hidden"`
	Scales    int    `json:"scales"`
	Experts   int    `json:"experts"`
	TopK      int    `json:"topk"`
	In        string `json:"in_dtype"`
	Out       string `json:"out_dtype"`
	Backend   string `json:"backend"`
	Provider  string `json:"provider"`
	// Reason is why the engine chose the transport.
	Reason string `json:"reason,omitempty"`
	Iters  int    `json:"iters"`
	Warmup int    `json:"warmup"`
	// CheckIters is how many iterations of each case were compared with
	// the oracle (0: none).
	CheckIters int    `json:"check_iters"`
	Cases      []Case `json:"cases,omitempty"`

	// One-device runs (RunDevice): the mode, whether graph replays were
	// timed too, the device, its launch, where the transport buffers
	// live, the device's copy bandwidth (read plus written, GB/s; 0 where
	// not measured), and the cases.
	Mode        string       `json:"mode,omitempty"`
	Graph       bool         `json:"graph,omitempty"`
	Device      string       `json:"device,omitempty"`
	Grid        int          `json:"grid,omitempty"`
	Block       int          `json:"block,omitempty"`
	Buffers     string       `json:"buffers,omitempty"`
	CopyGBps    float64      `json:"copy_gbps,omitempty"`
	DeviceCases []DeviceCase `json:"device_cases,omitempty"`
}

// Sample is one timed iteration on one rank: each half of each phase.
type Sample struct {
	DispatchSend time.Duration `json:"ds"`
	DispatchRecv time.Duration `json:"dr"`
	CombineSend  time.Duration `json:"cs"`
	CombineRecv  time.Duration `json:"cr"`
}

// Phase names.
const (
	Dispatch = "dispatch"
	Combine  = "combine"
)

// Case is one token count: every rank's timed samples, the nominal bytes
// of each phase per rank (dispatch T*K*(token+scale bytes), combine
// T*K*combine row bytes), and the check's verdict.
type Case struct {
	Tokens        int      `json:"tokens"`
	Samples       []Sample `json:"samples"`
	DispatchBytes int64    `json:"dispatch_bytes"`
	CombineBytes  int64    `json:"combine_bytes"`
	// Wire is, per rank, what its fabric writes carried per timed
	// iteration (empty when the backend does not count them).
	Wire []RankWire `json:"wire,omitempty"`
	// Pairs[r][q] is the rows rank r dispatched to rank q per timed
	// iteration (their mean, rounded down), itself included: in combine
	// the same rows travel back, q to r.
	Pairs [][]uint64 `json:"pairs,omitempty"`
	// FloorDispatch and FloorCombine are every rank's timed copies of the
	// phase's nominal bytes per rank (Spec.Floor; empty without it).
	FloorDispatch []time.Duration `json:"floor_dispatch,omitempty"`
	FloorCombine  []time.Duration `json:"floor_combine,omitempty"`
	// Checked says the case was compared with the oracle; CheckError is
	// the first mismatch any rank found ("" when none).
	Checked    bool   `json:"checked"`
	CheckError string `json:"check_error,omitempty"`
}

// Halves returns the send and recv halves of phase (Dispatch or Combine)
// over every sample.
func (c Case) Halves(phase string) (send, recv []time.Duration) {
	send = make([]time.Duration, len(c.Samples))
	recv = make([]time.Duration, len(c.Samples))
	for i, s := range c.Samples {
		if phase == Dispatch {
			send[i], recv[i] = s.DispatchSend, s.DispatchRecv
		} else {
			send[i], recv[i] = s.CombineSend, s.CombineRecv
		}
	}
	return send, recv
}

// Floor returns the timed memcpy samples of phase's nominal bytes.
func (c Case) Floor(phase string) []time.Duration {
	if phase == Dispatch {
		return c.FloorDispatch
	}
	return c.FloorCombine
}

// NominalBytes returns the nominal bytes of phase per rank.
func (c Case) NominalBytes(phase string) int64 {
	if phase == Dispatch {
		return c.DispatchBytes
	}
	return c.CombineBytes
}

// RankWire is what one rank's fabric writes carried per timed iteration,
// counted where the backend posted them (a2a.TrafficCounter): the count
// exchange, dispatch and combine. Copies inside a node domain are not on
// the wire and not counted.
type RankWire struct {
	Rank     int       `json:"rank"`
	Route    PhaseWire `json:"route"`
	Dispatch PhaseWire `json:"dispatch"`
	Combine  PhaseWire `json:"combine"`
}

// PhaseWire is one phase's writes per iteration: Bytes posted, Rows they
// carried, NominalBytes those rows hold (token and scales in dispatch,
// the expert output row in combine, one count row per count exchange
// write) and Ratio,
// Bytes over NominalBytes over all timed iterations (0 when no row was
// sent).
type PhaseWire struct {
	Bytes        uint64  `json:"bytes"`
	Rows         uint64  `json:"rows"`
	NominalBytes uint64  `json:"nominal_bytes"`
	Ratio        float64 `json:"ratio"`
}

// Phase returns w's figures for Dispatch or Combine.
func (w RankWire) Phase(phase string) PhaseWire {
	if phase == Dispatch {
		return w.Dispatch
	}
	return w.Combine
}
