package main

import (
	"fmt"
)

// elem is the size of one weight (bf16).
const elem = 2

// split says how the inference ranks divide a tensor.
type split uint8

const (
	// byRows: each inference rank holds a block of rows (column-parallel
	// linear layers, the vocabulary of embeddings, whole experts). Every
	// row block is contiguous, so trainers write it with scatter targets.
	byRows split = iota
	// byCols: each inference rank holds a block of columns of every row
	// (row-parallel linear layers). Each row's slice is its own small
	// piece, so trainers write it with a paged write, one page per row.
	byCols
	// replicated: every inference rank holds the whole tensor (norms,
	// routers).
	replicated
)

func (s split) String() string { return [...]string{"rows", "cols", "replicated"}[s] }

// tensor is one weight, row-major [Rows, Cols]. Trainers always shard it
// by rows, the way FSDP shards dim 0; inference ranks shard it by Split,
// rows in multiples of Unit (an expert's rows stay on one rank).
type tensor struct {
	Name       string
	Rows, Cols int
	Split      split
	Unit       int
}

func (t tensor) rowBytes() int { return t.Cols * elem }

// shape is a model: the flags that size it.
type shape struct {
	Layers    int `json:"layers"`
	Hidden    int `json:"hidden"`
	FFN       int `json:"ffn"`        // dense MLP width (0: none)
	Experts   int `json:"experts"`    // routed experts per layer (0: dense)
	ExpertFFN int `json:"expert_ffn"` // each expert's MLP width
	Shared    int `json:"shared"`     // shared experts per layer
	Vocab     int `json:"vocab"`
}

// presets are the model shapes -model names. "k2" is a 1T-parameter MoE
// layout (61 layers, hidden 7168, 384 experts of width 2048 plus one
// shared, vocabulary 163840); -shrink divides its widths, keeping the
// proportions between tensors.
var presets = map[string]shape{
	"dense": {Layers: 4, Hidden: 1024, FFN: 2816, Vocab: 8192},
	"k2":    {Layers: 61, Hidden: 7168, Experts: 384, ExpertFFN: 2048, Shared: 1, Vocab: 163840},
}

// shrink divides the widths by f (layers and expert counts stay).
func (s shape) shrink(f int) shape {
	s.Hidden, s.FFN, s.ExpertFFN, s.Vocab = s.Hidden/f, s.FFN/f, s.ExpertFFN/f, s.Vocab/f
	return s
}

func (s shape) check() error {
	if s.Layers < 1 || s.Hidden < 1 || s.Vocab < 1 || s.FFN < 0 || s.Experts < 0 || s.Shared < 0 ||
		(s.Experts+s.Shared > 0 && s.ExpertFFN < 1) || (s.FFN == 0 && s.Experts+s.Shared == 0) {
		return fmt.Errorf("model shape %+v: every width must be at least 1 and a layer needs an MLP", s)
	}
	return nil
}

// tensors lists the model's weights in the order both sides lay them out.
func (s shape) tensors() []tensor {
	h := s.Hidden
	ts := []tensor{{Name: "embed", Rows: s.Vocab, Cols: h}}
	for l := range s.Layers {
		p := fmt.Sprintf("layers.%d.", l)
		ts = append(ts,
			tensor{Name: p + "attn_norm", Rows: 1, Cols: h, Split: replicated},
			tensor{Name: p + "qkv", Rows: 3 * h, Cols: h},
			tensor{Name: p + "o", Rows: h, Cols: h, Split: byCols},
			tensor{Name: p + "mlp_norm", Rows: 1, Cols: h, Split: replicated})
		if s.FFN > 0 {
			ts = append(ts,
				tensor{Name: p + "gate_up", Rows: 2 * s.FFN, Cols: h},
				tensor{Name: p + "down", Rows: h, Cols: s.FFN, Split: byCols})
		}
		if s.Experts > 0 {
			// Experts are split whole across the inference ranks (expert
			// parallel): expert e's rows are one unit.
			ts = append(ts,
				tensor{Name: p + "router", Rows: s.Experts, Cols: h, Split: replicated},
				tensor{Name: p + "experts.gate_up", Rows: s.Experts * 2 * s.ExpertFFN, Cols: h, Unit: 2 * s.ExpertFFN},
				tensor{Name: p + "experts.down", Rows: s.Experts * h, Cols: s.ExpertFFN, Unit: h})
		}
		if s.Shared > 0 {
			ts = append(ts,
				tensor{Name: p + "shared.gate_up", Rows: s.Shared * 2 * s.ExpertFFN, Cols: h},
				tensor{Name: p + "shared.down", Rows: h, Cols: s.Shared * s.ExpertFFN, Split: byCols})
		}
	}
	ts = append(ts, tensor{Name: "norm", Rows: 1, Cols: h, Split: replicated}, tensor{Name: "lm_head", Rows: s.Vocab, Cols: h})
	for i := range ts {
		ts[i].Unit = max(ts[i].Unit, 1)
	}
	return ts
}

// params counts the model's weights.
func params(ts []tensor) int64 {
	var n int64
	for _, t := range ts {
		n += int64(t.Rows) * int64(t.Cols)
	}
	return n
}

// part returns the half-open block [lo, hi) of n items that rank k of m
// holds, in multiples of unit.
func part(n, unit, k, m int) (lo, hi int) {
	units := n / unit
	return k * units / m * unit, (k + 1) * units / m * unit
}

// trainerRows is trainer k's row block of t (of T trainers).
func trainerRows(t tensor, k, trainers int) (int, int) { return part(t.Rows, 1, k, trainers) }

// inferBlock is inference rank k's block of t: rows [r0, r1) and columns
// [c0, c1).
func inferBlock(t tensor, k, infer int) (r0, r1, c0, c1 int) {
	switch t.Split {
	case byRows:
		r0, r1 = part(t.Rows, t.Unit, k, infer)
		return r0, r1, 0, t.Cols
	case byCols:
		c0, c1 = part(t.Cols, 1, k, infer)
		return 0, t.Rows, c0, c1
	default:
		return 0, t.Rows, 0, t.Cols
	}
}

// layout places every tensor's shard in one rank's registered buffer:
// Offset[i] is where tensor i's shard starts; Size the whole buffer.
type layout struct {
	Offset []int
	Size   int
}

// align keeps every shard 64-byte aligned.
func align(n int) int { return (n + 63) &^ 63 }

func trainerLayout(ts []tensor, k, trainers int) layout {
	var l layout
	for _, t := range ts {
		r0, r1 := trainerRows(t, k, trainers)
		l.Offset = append(l.Offset, l.Size)
		l.Size += align((r1 - r0) * t.rowBytes())
	}
	return l
}

func inferLayout(ts []tensor, k, infer int) layout {
	var l layout
	for _, t := range ts {
		r0, r1, c0, c1 := inferBlock(t, k, infer)
		l.Offset = append(l.Offset, l.Size)
		l.Size += align((r1 - r0) * (c1 - c0) * elem)
	}
	return l
}
