package a2a

// The views below describe caller memory. Strides are in bytes for token
// rows and in elements for float32 arrays; 0 means packed. (The reference
// mixed bytes and elements for the same kind of stride.)

// DispatchInput is one rank's tokens for DispatchSend.
type DispatchInput struct {
	// Tokens is m, the number of tokens in this call (0 <= m <= MaxTokens).
	// The host backend takes it from here; a device backend may read it
	// from device memory instead.
	Tokens  int
	X       []byte // m rows of TokenBytes
	XStride int    // bytes between rows; 0 means TokenBytes
	// Scales holds m rows of Config.Scales float32 values at
	// Scales[t*ScaleTokenStride + s*ScaleElemStride]; nil when Scales is 0.
	Scales           []float32
	ScaleTokenStride int // 0 means Config.Scales
	ScaleElemStride  int // 0 means 1
	// Indices holds m rows of K expert ids, packed; a token's K ids must
	// differ. The planner keeps a copy, which the iteration's combine uses.
	Indices []uint32
}

// DispatchOutput receives one rank's expert-major tokens in DispatchRecv.
type DispatchOutput struct {
	// ExpertTokens gets L counts: copies received per local expert.
	ExpertTokens []int32
	// ExpertOffsets, when not nil, gets the L+1 padded segment starts.
	ExpertOffsets []int32
	// X gets the rows: local expert i's copies occupy rows
	// [ExpertOffsets[i], ExpertOffsets[i]+ExpertTokens[i]); padding rows
	// are left as they were. It must hold Layout.OutputRows rows.
	X       []byte
	XStride int // bytes between rows; 0 means TokenBytes
	// Scales follows X's rows, as in DispatchInput (any strides, so
	// column-major scale layouts work).
	Scales           []float32
	ScaleTokenStride int
	ScaleElemStride  int
	// Dropped gets the number of this rank's copies (token, slot) routed
	// to the experts of inactive ranks and so not sent (see
	// Context.SetActiveRanks); 0 while every rank is active.
	Dropped int
	// DroppedExperts, when not nil, gets E counts: per expert, how many of
	// this rank's copies were dropped (0 for the experts of active ranks).
	DroppedExperts []int32
}

// CombineInput is one rank's expert outputs for CombineSend, in the row
// layout of its DispatchOutput.X (OutputRows rows of CombineBytes).
type CombineInput struct {
	Y       []byte
	YStride int // bytes between rows; 0 means CombineBytes
}

// CombineOutput receives the combined tokens in CombineRecv.
type CombineOutput struct {
	Out       []byte // the dispatch's m rows of CombineBytes
	OutStride int    // bytes between rows; 0 means CombineBytes
	// Weights holds m rows of K gate weights, packed, in the order of the
	// dispatch's Indices.
	Weights []float32
	// Accumulate adds the result to Out's current contents instead of
	// overwriting them (still one rounding per element).
	Accumulate bool
}

func orDefault(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

// need returns the length a strided array of rows x cols needs.
func need(rows, cols, rowStride, colStride int) int {
	if rows == 0 || cols == 0 {
		return 0
	}
	return (rows-1)*rowStride + (cols-1)*colStride + 1
}

func checkRows(op, arg string, buf []byte, rows, width, stride int) error {
	if stride < width {
		return argErr(op, arg, "stride %d below row size %d", stride, width)
	}
	if n := need(rows, width, stride, 1); len(buf) < n {
		return argErr(op, arg, "%d bytes, need %d for %d rows", len(buf), n, rows)
	}
	return nil
}

func checkScales(op string, l *Layout, s []float32, rows, ts, es int) error {
	if l.Scales == 0 {
		return nil
	}
	if ts < 0 || es < 0 {
		return argErr(op, "Scales", "negative stride")
	}
	if n := need(rows, l.Scales, ts, es); len(s) < n {
		return argErr(op, "Scales", "%d values, need %d", len(s), n)
	}
	return nil
}

func (in *DispatchInput) check(l *Layout) error {
	const op = "dispatch send"
	if in.Tokens < 0 || in.Tokens > l.MaxTokens {
		return argErr(op, "Tokens", "%d not in [0, %d]", in.Tokens, l.MaxTokens)
	}
	if err := checkRows(op, "X", in.X, in.Tokens, l.TokenBytes, orDefault(in.XStride, l.TokenBytes)); err != nil {
		return err
	}
	return checkScales(op, l, in.Scales, in.Tokens, orDefault(in.ScaleTokenStride, l.Scales), orDefault(in.ScaleElemStride, 1))
}

func (out *DispatchOutput) check(l *Layout) error {
	const op = "dispatch recv"
	if len(out.ExpertTokens) < l.LocalExperts {
		return argErr(op, "ExpertTokens", "%d entries, need %d", len(out.ExpertTokens), l.LocalExperts)
	}
	if out.ExpertOffsets != nil && len(out.ExpertOffsets) < l.LocalExperts+1 {
		return argErr(op, "ExpertOffsets", "%d entries, need %d", len(out.ExpertOffsets), l.LocalExperts+1)
	}
	if out.DroppedExperts != nil && len(out.DroppedExperts) < l.Experts {
		return argErr(op, "DroppedExperts", "%d entries, need %d", len(out.DroppedExperts), l.Experts)
	}
	if err := checkRows(op, "X", out.X, l.OutputRows, l.TokenBytes, orDefault(out.XStride, l.TokenBytes)); err != nil {
		return err
	}
	return checkScales(op, l, out.Scales, l.OutputRows, orDefault(out.ScaleTokenStride, l.Scales), orDefault(out.ScaleElemStride, 1))
}

func (in *CombineInput) check(l *Layout) error {
	return checkRows("combine send", "Y", in.Y, l.OutputRows, l.CombineBytes, orDefault(in.YStride, l.CombineBytes))
}

func (out *CombineOutput) check(l *Layout, m int) error {
	const op = "combine recv"
	if err := checkRows(op, "Out", out.Out, m, l.CombineBytes, orDefault(out.OutStride, l.CombineBytes)); err != nil {
		return err
	}
	if len(out.Weights) < m*l.ExpertsPerToken {
		return argErr(op, "Weights", "%d values, need %d", len(out.Weights), m*l.ExpertsPerToken)
	}
	return nil
}
