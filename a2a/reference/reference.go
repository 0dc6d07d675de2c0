package reference

import (
	"fmt"

	"github.com/ferryrdma/ferry/a2a"
)

// GroupInput is the input of one replica group (all its replicas pass the
// same).
type GroupInput struct {
	Tokens  int       // m_h
	X       []byte    // Tokens rows of Layout.TokenBytes, packed
	Scales  []float32 // Tokens rows of Config.Scales, packed (nil when Scales is 0)
	Indices []uint32  // Tokens rows of K expert ids, packed
	Weights []float32 // Tokens rows of K gate weights, packed (combine only)
}

// Copy identifies one routing entry: group, token and top-k slot.
type Copy struct {
	Group, Token, Slot int32
}

// Dispatched is what one rank's dispatch must produce.
type Dispatched struct {
	ExpertTokens []int32   // L counts
	ExpertOffset []int32   // L+1 padded segment starts
	X            []byte    // OutputRows rows of TokenBytes; gap rows zero
	Scales       []float32 // OutputRows rows of Scales
	// Origin names the copy in each output row; gap rows hold Group -1.
	Origin []Copy
}

// VisitOrder returns the order in which rank r lists source groups.
func VisitOrder(l *a2a.Layout, r int) []int {
	P, n, g := l.GroupsPerNode, l.Node(r), l.Group(r)
	var order []int
	for dn := 1; dn < l.Nodes; dn++ {
		node := (n + dn) % l.Nodes
		for h := node * P; h < node*P+P; h++ {
			order = append(order, h)
		}
	}
	for dg := 1; dg < P; dg++ {
		order = append(order, n*P+(g-n*P+dg)%P)
	}
	return append(order, g)
}

func check(l *a2a.Layout, groups []GroupInput, needWeights bool) error {
	if len(groups) != l.Groups {
		return fmt.Errorf("reference: %d groups, want %d: %w", len(groups), l.Groups, a2a.ErrInvalidArgument)
	}
	K := l.ExpertsPerToken
	for h, g := range groups {
		m := g.Tokens
		switch {
		case m < 0 || m > l.MaxTokens:
			return fmt.Errorf("reference: group %d: %d tokens: %w", h, m, a2a.ErrInvalidArgument)
		case len(g.X) < m*l.TokenBytes || len(g.Scales) < m*l.Scales || len(g.Indices) < m*K:
			return fmt.Errorf("reference: group %d: short inputs: %w", h, a2a.ErrInvalidArgument)
		case needWeights && len(g.Weights) < m*K:
			return fmt.Errorf("reference: group %d: short weights: %w", h, a2a.ErrInvalidArgument)
		}
		for i, e := range g.Indices[:m*K] {
			if int(e) >= l.Experts {
				return fmt.Errorf("reference: group %d entry %d: expert %d: %w", h, i, e, a2a.ErrInvalidArgument)
			}
		}
	}
	return nil
}

// Dispatch returns every rank's dispatch result for cfg (its Rank is
// ignored).
func Dispatch(cfg a2a.Config, groups []GroupInput) ([]Dispatched, error) {
	return DispatchActive(cfg, groups, nil)
}

// activeSet checks active (nil: every rank) and says which groups are
// live (have an active replica).
func activeSet(l *a2a.Layout, active []bool) ([]bool, []bool, error) {
	if active == nil {
		active = make([]bool, l.WorldSize)
		for q := range active {
			active[q] = true
		}
	}
	if len(active) != l.WorldSize {
		return nil, nil, fmt.Errorf("reference: %d active entries for %d ranks: %w", len(active), l.WorldSize, a2a.ErrInvalidArgument)
	}
	live := make([]bool, l.Groups)
	for q, a := range active {
		live[l.Group(q)] = live[l.Group(q)] || a
	}
	return active, live, nil
}

// DispatchActive is Dispatch in a world where only the ranks with
// active[q] take part (nil: all of them; see a2a.Context.SetActiveRanks):
// the tokens of a group with no active replica are absent, copies routed
// to the experts of an inactive rank reach no one, and the result of an
// inactive rank is the zero Dispatched.
func DispatchActive(cfg a2a.Config, groups []GroupInput, active []bool) ([]Dispatched, error) {
	cfg.Rank = 0
	l, err := cfg.Layout()
	if err != nil {
		return nil, err
	}
	if err := check(&l, groups, false); err != nil {
		return nil, err
	}
	active, live, err := activeSet(&l, active)
	if err != nil {
		return nil, err
	}
	K, L, Hs, tb := l.ExpertsPerToken, l.LocalExperts, l.Scales, l.TokenBytes
	out := make([]Dispatched, l.WorldSize)
	for r := range out {
		if !active[r] {
			continue
		}
		d := Dispatched{
			ExpertTokens: make([]int32, L),
			ExpertOffset: make([]int32, L+1),
			X:            make([]byte, l.OutputRows*tb),
			Scales:       make([]float32, l.OutputRows*Hs),
			Origin:       make([]Copy, l.OutputRows),
		}
		for i := range d.Origin {
			d.Origin[i].Group = -1
		}
		order := VisitOrder(&l, r)
		row := 0
		B := l.MaxTokensPerExpert
		for i := 0; i < L; i++ {
			e := r*L + i
			if B > 0 {
				row = i * B
			}
			d.ExpertOffset[i] = int32(row)
			start := row
			for _, h := range order {
				if !live[h] {
					continue
				}
				g := &groups[h]
				for t := 0; t < g.Tokens; t++ {
					for k := 0; k < K; k++ {
						if int(g.Indices[t*K+k]) != e {
							continue
						}
						if B > 0 && row-start == B {
							return nil, fmt.Errorf("reference: expert %d gets more than %d copies: %w", e, B, a2a.ErrExpertOverflow)
						}
						copy(d.X[row*tb:(row+1)*tb], g.X[t*tb:(t+1)*tb])
						copy(d.Scales[row*Hs:(row+1)*Hs], g.Scales[t*Hs:(t+1)*Hs])
						d.Origin[row] = Copy{int32(h), int32(t), int32(k)}
						row++
					}
				}
			}
			d.ExpertTokens[i] = int32(row - start)
			pad := l.ExpertPadding
			row = (row + pad - 1) / pad * pad
		}
		if B > 0 {
			row = L * B
		}
		d.ExpertOffset[L] = int32(row)
		out[r] = d
	}
	return out, nil
}

// Combine returns every group's combine result: Tokens rows of
// CombineBytes, packed. expertY[r] holds rank r's expert outputs
// in the row layout of dispatched[r] (OutputRows rows of CombineBytes,
// packed). With accumulate, prev[h] is group h's output before the call.
func Combine(cfg a2a.Config, groups []GroupInput, dispatched []Dispatched, expertY [][]byte, prev [][]byte, accumulate bool) ([][]byte, error) {
	return CombineActive(cfg, groups, dispatched, expertY, prev, accumulate, nil)
}

// CombineActive is Combine in a world where only the ranks with
// active[q] take part (nil: all of them), over DispatchActive's results:
// a slot whose expert belongs to an inactive rank adds nothing (as if its
// weight were zero), expertY of an inactive rank is not read, and the
// result of a group with no active replica is nil.
func CombineActive(cfg a2a.Config, groups []GroupInput, dispatched []Dispatched, expertY [][]byte, prev [][]byte,
	accumulate bool, active []bool) ([][]byte, error) {
	cfg.Rank = 0
	l, err := cfg.Layout()
	if err != nil {
		return nil, err
	}
	if err := check(&l, groups, true); err != nil {
		return nil, err
	}
	active, live, err := activeSet(&l, active)
	if err != nil {
		return nil, err
	}
	if len(dispatched) != l.WorldSize || len(expertY) != l.WorldSize || (accumulate && len(prev) != l.Groups) {
		return nil, fmt.Errorf("reference: combine inputs per rank/group missing: %w", a2a.ErrInvalidArgument)
	}
	K, L, H, cb, ct := l.ExpertsPerToken, l.LocalExperts, l.Hidden, l.CombineBytes, l.CombineType
	// Where each copy sits on its expert's rank.
	rowOf := make([][]int32, l.Groups)
	for h := range rowOf {
		rowOf[h] = make([]int32, groups[h].Tokens*K)
	}
	for r, d := range dispatched {
		if !active[r] {
			continue
		}
		if len(expertY[r]) < l.OutputRows*cb {
			return nil, fmt.Errorf("reference: expert output of rank %d too short: %w", r, a2a.ErrInvalidArgument)
		}
		for row, c := range d.Origin {
			if c.Group >= 0 {
				rowOf[c.Group][int(c.Token)*K+int(c.Slot)] = int32(row)
			}
		}
	}
	out := make([][]byte, l.Groups)
	acc := make([]float32, H)
	for h, g := range groups {
		if !live[h] {
			continue
		}
		o := make([]byte, g.Tokens*cb)
		if accumulate {
			copy(o, prev[h])
		}
		for t := 0; t < g.Tokens; t++ {
			dst := o[t*cb : (t+1)*cb]
			for x := range acc {
				acc[x] = 0
				if accumulate {
					acc[x] = a2a.DecodeFloat32(ct, dst, x)
				}
			}
			for k := 0; k < K; k++ {
				e := int(g.Indices[t*K+k])
				q := e / L
				if !active[q] {
					continue
				}
				row := int(rowOf[h][t*K+k])
				y := expertY[q][row*cb : (row+1)*cb]
				w := g.Weights[t*K+k]
				for x := range acc {
					acc[x] = a2a.MulAdd(acc[x], w, a2a.DecodeFloat32(ct, y, x))
				}
			}
			for x, v := range acc {
				a2a.EncodeFloat32(ct, dst, x, v)
			}
		}
		out[h] = o
	}
	return out, nil
}
