package a2a_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/reference"
	"github.com/ferryrdma/ferry/a2a/workload"
)

// slot names one copy: its group and its row in that group's layout.
type slot struct{ group, pos int32 }

// TestPlannerInvariants moves symbolic rows through every rank's planned
// paths, without a transport, and checks that each copy lands in exactly
// one receiver slot, that every run reads the slot holding its copy, that
// combine returns every copy's result exactly once to every replica of its
// group, that rows stay inside the buffers, and that per destination and
// tag the immediates produced equal the immediates expected. Half the
// worlds run with some ranks inactive: then only the active ranks plan,
// copies for inactive ranks' experts must be dropped and no other, groups
// without an active replica send nothing, and no immediate goes to or is
// expected from an inactive rank.
func TestPlannerInvariants(t *testing.T) {
	n := 400
	if testing.Short() {
		n = 60
	}
	rng := rand.New(rand.NewPCG(77, 1))
	masked := 0
	for it := 0; it < n; it++ {
		cfg := workload.RandomConfig(rng, 16)
		l0, err := cfg.Layout()
		if err != nil {
			t.Fatal(err)
		}
		groups := workload.RandomGroups(rng, &l0, rng.IntN(3) == 0)
		var active []bool
		if it%2 == 1 {
			active = workload.RandomActive(rng, cfg.WorldSize, -1)
			masked++
		}
		if err := checkPlans(cfg, groups, active); err != nil {
			t.Fatalf("config %d %+v active %v: %v", it, cfg, active, err)
		}
	}
	t.Logf("%d worlds, %d of them with a random active mask", n, masked)
}

func checkPlans(cfg a2a.Config, groups []reference.GroupInput, active []bool) error {
	W := cfg.WorldSize
	if active == nil {
		active = make([]bool, W)
		for q := range active {
			active[q] = true
		}
	}
	planners := make([]*a2a.Planner, W)
	var l *a2a.Layout
	for r := range planners {
		c := cfg
		c.Rank = r
		p, err := a2a.NewPlanner(c)
		if err != nil {
			return err
		}
		l = p.Layout()
		if !active[r] {
			continue
		}
		if err := p.SetActive(active); err != nil {
			return err
		}
		g := &groups[l.Group(r)]
		if err := p.PlanSend(g.Indices, g.Tokens); err != nil {
			return err
		}
		planners[r] = p
	}
	G, RW, K, D, M := l.Groups, l.RowWords, l.ExpertsPerToken, l.ReplicaSize, int32(l.Private)
	live := make([]bool, G)
	for q := range active {
		live[l.Group(q)] = live[l.Group(q)] || active[q]
	}
	// Rows of groups without an active replica hold garbage: nobody may
	// read them.
	table := make([]uint32, G*RW)
	for i := range table {
		table[i] = 0xdeadbeef
	}
	written := make([]bool, G)
	for r, p := range planners {
		if p == nil {
			continue
		}
		h := l.Group(r)
		row := table[h*RW : h*RW+RW]
		if !written[h] {
			copy(row, p.Send().Row)
			written[h] = true
		} else if fmt.Sprint(row) != fmt.Sprint(p.Send().Row) {
			return fmt.Errorf("replicas of group %d disagree on their count row", h)
		}
	}
	for r, p := range planners {
		if p == nil {
			continue
		}
		if err := p.PlanRecv(table); err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
	}

	// Dispatch: fill every receive buffer symbolically.
	recv := make([]map[int32]slot, W)
	for q := range recv {
		recv[q] = map[int32]slot{}
	}
	imm := make([][a2a.NumTags]int, W)
	put := func(q int, row int32, s slot) error {
		if row < 0 || int(row) >= l.RecvRows {
			return fmt.Errorf("rank %d: receive row %d outside [0, %d)", q, row, l.RecvRows)
		}
		if old, ok := recv[q][row]; ok {
			return fmt.Errorf("rank %d: receive row %d written twice (%v, %v)", q, row, old, s)
		}
		recv[q][row] = s
		return nil
	}
	dests := make([]map[slot]int32, G) // per group: copy -> destination rank
	for r, p := range planners {
		if p == nil {
			continue
		}
		sp, h := p.Send(), int32(l.Group(r))
		if dests[h] == nil {
			dests[h] = map[slot]int32{}
		}
		for i := 0; i < sp.Tokens*K; i++ {
			c := sp.Copy(i)
			if int(c.Pos) >= l.SendRows {
				return fmt.Errorf("rank %d: layout row %d beyond %d", r, c.Pos, l.SendRows)
			}
			if (c.Path == a2a.PathDropped) != !active[c.Dest] {
				return fmt.Errorf("rank %d copy %d: path %v to rank %d (active %v)", r, i, c.Path, c.Dest, active[c.Dest])
			}
			if c.Path == a2a.PathDropped {
				continue
			}
			dests[h][slot{h, c.Pos}] = c.Dest
			if c.Path == a2a.PathNodePush {
				if err := put(int(c.Dest), c.PushRow, slot{h, c.Pos}); err != nil {
					return err
				}
			}
		}
		for _, q := range sp.Routes {
			if !active[q] {
				return fmt.Errorf("rank %d: count row to inactive rank %d", r, q)
			}
			imm[q][a2a.TagRoute]++
		}
		for _, tr := range sp.Eager {
			if !active[tr.Peer] {
				return fmt.Errorf("rank %d: eager write to inactive rank %d", r, tr.Peer)
			}
			imm[tr.Peer][a2a.TagDispatch]++
			if tr.Rows > M {
				return fmt.Errorf("rank %d: eager write of %d rows, window %d", r, tr.Rows, M)
			}
			for c := int32(0); c < tr.Rows; c++ {
				if err := put(int(tr.Peer), tr.DstRow+c, slot{h, tr.SrcRow + c}); err != nil {
					return err
				}
			}
		}
		for _, tr := range sp.Overflow {
			imm[tr.Peer][a2a.TagDispatch] += l.NICsPerGPU
			for c := int32(0); c < tr.Rows; c++ {
				if err := put(int(tr.Peer), tr.DstRow+c, slot{h, tr.SrcRow + c}); err != nil {
					return err
				}
			}
		}
	}
	// Every copy is received exactly once, by its destination, from the
	// place the run says.
	seen := map[slot]int32{}
	for q, p := range planners {
		if p == nil {
			continue
		}
		rp := p.Recv()
		copies := 0
		for ri, run := range rp.Runs {
			if int(run.Padded+run.Count) > l.OutputRows {
				return fmt.Errorf("rank %d run %d: output rows to %d beyond %d", q, ri, run.Padded+run.Count, l.OutputRows)
			}
			remote := l.Node(int(run.Source)) != l.Node(q)
			if remote != (ri < rp.RemoteRuns) {
				return fmt.Errorf("rank %d run %d: remote %v but RemoteRuns %d", q, ri, remote, rp.RemoteRuns)
			}
			for c := int32(0); c < run.Count; c++ {
				s := slot{run.Group, run.Pos + c}
				if d, ok := dests[run.Group][s]; !ok || d != int32(q) {
					return fmt.Errorf("rank %d: run holds %v, which goes to %d (exists %v)", q, s, d, ok)
				}
				if prev, dup := seen[s]; dup {
					return fmt.Errorf("copy %v received by %d and %d", s, prev, q)
				}
				seen[s] = int32(q)
				copies++
				var got slot
				switch run.Kind {
				case a2a.SourceOwnRecv:
					got = recv[q][run.SrcRow+c]
				case a2a.SourceOwnSend, a2a.SourcePeerSend:
					src := planners[run.Source].Send()
					if (run.Kind == a2a.SourceOwnSend) != (int(run.Source) == q) || l.Node(int(run.Source)) != l.Node(q) {
						return fmt.Errorf("rank %d: run kind %d from rank %d", q, run.Kind, run.Source)
					}
					got = slot{int32(l.Group(int(run.Source))), run.SrcRow + c}
					if int(got.pos) >= src.Tokens*K+1 && src.Tokens*K > 0 && int(got.pos) >= l.SendRows {
						return fmt.Errorf("rank %d: send row %d out of range", q, got.pos)
					}
				default:
					return fmt.Errorf("rank %d: run without a source kind", q)
				}
				if got != s {
					return fmt.Errorf("rank %d: run reads %v from kind %d row %d, holds %v", q, s, run.Kind, run.SrcRow+c, got)
				}
			}
		}
		if copies != rp.Copies {
			return fmt.Errorf("rank %d: %d copies in runs, Copies says %d", q, copies, rp.Copies)
		}
	}
	total := 0
	for h := range groups {
		if !live[h] {
			continue
		}
		for _, e := range groups[h].Indices[:groups[h].Tokens*K] {
			if active[l.Owner(int(e))] {
				total++
			}
		}
	}
	if len(seen) != total {
		return fmt.Errorf("%d copies received, %d routed to active ranks from live groups", len(seen), total)
	}

	// Combine: every rank sends each received copy's result back; each
	// replica of the copy's group must get it exactly once at its position.
	back := make([]map[int32]slot, W)
	for q := range back {
		back[q] = map[int32]slot{}
	}
	putBack := func(q int, row int32, s slot) error {
		if !active[q] {
			return fmt.Errorf("combine: write to inactive rank %d", q)
		}
		if row < 0 || int(row) >= l.RecvRows {
			return fmt.Errorf("combine: rank %d row %d outside [0, %d)", q, row, l.RecvRows)
		}
		if old, ok := back[q][row]; ok {
			return fmt.Errorf("combine: rank %d row %d written twice (%v, %v)", q, row, old, s)
		}
		back[q][row] = s
		return nil
	}
	for r, p := range planners {
		if p == nil {
			continue
		}
		rp := p.Recv()
		staged := map[int32]slot{}
		for ri, run := range rp.Runs {
			for c := int32(0); c < run.Count; c++ {
				s := slot{run.Group, run.Pos + c}
				if ri < rp.RemoteRuns {
					if int(run.CombineRow+c) >= l.SendRows {
						return fmt.Errorf("rank %d: staging row %d beyond %d", r, run.CombineRow+c, l.SendRows)
					}
					staged[run.CombineRow+c] = s
					continue
				}
				for q := int(run.Group) * D; q < int(run.Group)*D+D; q++ {
					if !active[q] {
						continue
					}
					if err := putBack(q, run.CombineRow+c, s); err != nil {
						return err
					}
				}
			}
		}
		for _, tr := range rp.Combine {
			imm[tr.Peer][a2a.TagCombine] += l.NICsPerGPU
			for c := int32(0); c < tr.Rows; c++ {
				s, ok := staged[tr.SrcRow+c]
				if !ok {
					return fmt.Errorf("rank %d: combine write of unstaged row %d", r, tr.SrcRow+c)
				}
				if err := putBack(int(tr.Peer), tr.DstRow+c, s); err != nil {
					return err
				}
			}
		}
	}
	members, nodeMembers := 0, make([]int, l.Nodes)
	for q := range active {
		if active[q] {
			members++
			nodeMembers[l.Node(q)]++
		}
	}
	for q, p := range planners {
		if p == nil {
			continue
		}
		h := int32(l.Group(q))
		sp := p.Send()
		if len(back[q]) != sp.Tokens*K-sp.Dropped {
			return fmt.Errorf("rank %d: %d combine rows arrived for %d copies, %d dropped", q, len(back[q]), sp.Tokens*K, sp.Dropped)
		}
		for i := 0; i < sp.Tokens*K; i++ {
			c := sp.Copy(i)
			if c.Path == a2a.PathDropped {
				continue
			}
			if got := back[q][c.Pos]; got != (slot{h, c.Pos}) {
				return fmt.Errorf("rank %d: combine row %d holds %v", q, c.Pos, got)
			}
		}
		rp := p.Recv()
		imm[q][a2a.TagDispatchBarrier] = members - 1
		imm[q][a2a.TagCombineBarrier] = members - 1
		imm[q][a2a.TagJoin] = members - 1
		// Every rank signals each active node peer once per phase.
		imm[q][a2a.TagNodeDispatch] = nodeMembers[l.Node(q)] - 1
		imm[q][a2a.TagNodeCombine] = nodeMembers[l.Node(q)] - 1
		for tag := a2a.TagRoute; tag <= a2a.TagJoin; tag++ {
			if imm[q][tag] != rp.Imm[tag].Expected {
				return fmt.Errorf("rank %d tag %v: %d immediates produced, %d expected", q, tag, imm[q][tag], rp.Imm[tag].Expected)
			}
		}
	}
	return nil
}

func TestPlanSendRejects(t *testing.T) {
	p, err := a2a.NewPlanner(a2a.Config{WorldSize: 2, MaxTokens: 4, Hidden: 8, DispatchType: a2a.BF16,
		CombineType: a2a.BF16, Experts: 4, ExpertsPerToken: 2})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		idx []uint32
		m   int
	}{
		"expert out of range": {[]uint32{0, 4}, 1},
		"duplicate expert":    {[]uint32{1, 1}, 1},
		"too many tokens":     {make([]uint32, 10), 5},
		"negative tokens":     {nil, -1},
		"short indices":       {[]uint32{0, 1, 2}, 2},
	} {
		if err := p.PlanSend(c.idx, c.m); !errors.Is(err, a2a.ErrInvalidArgument) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	if err := p.PlanSend(nil, 0); err != nil {
		t.Fatalf("zero tokens: %v", err)
	}
}

func TestPlanRecvRejectsBadTables(t *testing.T) {
	cfg := a2a.Config{WorldSize: 4, NVLinkSize: 2, MaxTokens: 4, Hidden: 8, DispatchType: a2a.BF16,
		CombineType: a2a.BF16, Experts: 8, ExpertsPerToken: 2, PrivateTokens: a2a.NoPrivateWindow}
	l, _ := cfg.Layout()
	groups := workload.RandomGroups(rand.New(rand.NewPCG(1, 1)), &l, false)
	mk := func(rank int) (*a2a.Planner, []uint32) {
		c := cfg
		table := make([]uint32, l.Groups*l.RowWords)
		for h := range groups {
			c.Rank = h
			p, _ := a2a.NewPlanner(c)
			if err := p.PlanSend(groups[h].Indices, groups[h].Tokens); err != nil {
				t.Fatal(err)
			}
			copy(table[h*l.RowWords:], p.Send().Row)
		}
		c.Rank = rank
		p, _ := a2a.NewPlanner(c)
		return p, table
	}
	p, table := mk(0)
	if err := p.PlanRecv(table); err != nil {
		t.Fatalf("good table: %v", err)
	}
	if err := p.PlanRecv(table[:len(table)-1]); !errors.Is(err, a2a.ErrInvalidArgument) {
		t.Fatalf("short table: %v", err)
	}
	// A corrupt word concerns only some receivers; at least one must
	// notice, and none may go out of range.
	for word := 0; word < l.RowWords; word++ {
		rejected := 0
		for r := 0; r < cfg.WorldSize; r++ {
			p, table := mk(r)
			table[3*l.RowWords+word] += 1 << 20
			switch err := p.PlanRecv(table); {
			case errors.Is(err, a2a.ErrInvalidArgument):
				rejected++
			case err != nil:
				t.Errorf("corrupt word %d rank %d: %v", word, r, err)
			}
		}
		if rejected == 0 {
			t.Errorf("corrupt word %d: no rank noticed", word)
		}
	}
	// A table whose own row disagrees with this rank's PlanSend.
	p, table = mk(1)
	if err := p.PlanSend(groups[1].Indices, groups[1].Tokens); err != nil {
		t.Fatal(err)
	}
	table[1*l.RowWords] ^= 1
	if err := p.PlanRecv(table); !errors.Is(err, a2a.ErrInvalidArgument) {
		t.Fatalf("own row mismatch: %v", err)
	}
}

// FuzzPlanRecv feeds arbitrary count tables to PlanRecv: whatever peers
// send, it returns an error or a plan whose rows stay inside the buffers,
// and never panics.
func FuzzPlanRecv(f *testing.F) {
	cfg := a2a.Config{WorldSize: 4, NVLinkSize: 2, NICsPerGPU: 2, MaxTokens: 3, Hidden: 4, DispatchType: a2a.FP8,
		CombineType: a2a.BF16, Experts: 6, ExpertsPerToken: 2, PrivateTokens: 1}
	l, _ := cfg.Layout()
	f.Add(make([]byte, 4*l.Groups*l.RowWords), uint8(0))
	f.Add([]byte{1, 0, 0, 0, 2, 0, 0, 0, 255, 255, 255, 255}, uint8(3))
	f.Fuzz(func(t *testing.T, raw []byte, rank uint8) {
		c := cfg
		c.Rank = int(rank) % cfg.WorldSize
		p, err := a2a.NewPlanner(c)
		if err != nil {
			t.Fatal(err)
		}
		table := make([]uint32, l.Groups*l.RowWords)
		for i := range table {
			if 4*i+4 <= len(raw) {
				table[i] = uint32(raw[4*i]) | uint32(raw[4*i+1])<<8 | uint32(raw[4*i+2])<<16 | uint32(raw[4*i+3])<<24
			}
		}
		if err := p.PlanRecv(table); err != nil {
			if !errors.Is(err, a2a.ErrInvalidArgument) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		rp := p.Recv()
		for _, run := range rp.Runs {
			limit := int32(l.RecvRows)
			if run.Kind != a2a.SourceOwnRecv {
				limit = int32(l.SendRows)
			}
			if run.Count <= 0 || run.SrcRow < 0 || run.SrcRow+run.Count > limit ||
				run.Padded < 0 || run.Padded+run.Count > int32(l.OutputRows) ||
				run.CombineRow < 0 || run.CombineRow+run.Count > int32(max(l.SendRows, l.RecvRows)) {
				t.Fatalf("run out of range: %+v", run)
			}
		}
		for _, tr := range rp.Combine {
			if tr.SrcRow < 0 || tr.SrcRow+tr.Rows > int32(l.SendRows) || tr.DstRow < 0 || tr.DstRow+tr.Rows > int32(l.RecvRows) {
				t.Fatalf("combine transfer out of range: %+v", tr)
			}
		}
	})
}

// TestPlanRecvBatched: in the batched layout every rank fails the same
// table when any active rank's expert is over the bound (not only the
// expert's owner), experts of inactive ranks are not counted, and within
// the bound each local expert's segment starts at i*B.
func TestPlanRecvBatched(t *testing.T) {
	cfg := a2a.Config{WorldSize: 4, NVLinkSize: 2, MaxTokens: 4, Hidden: 8, DispatchType: a2a.BF16,
		CombineType: a2a.BF16, Experts: 8, ExpertsPerToken: 2, MaxTokensPerExpert: 5}
	l, err := cfg.Layout()
	if err != nil {
		t.Fatal(err)
	}
	if l.OutputRows != l.LocalExperts*5 {
		t.Fatalf("output rows %d, want L*B = %d", l.OutputRows, l.LocalExperts*5)
	}
	// Every token of every group goes to experts 6 and 7 (rank 3's): 4
	// groups of up to 4 tokens.
	table := func(m int) []uint32 {
		t := make([]uint32, l.Groups*l.RowWords)
		for h := 0; h < l.Groups; h++ {
			row := t[h*l.RowWords : (h+1)*l.RowWords]
			row[6], row[7] = uint32(m), uint32(m)
			seg := row[l.Experts:]
			seg[4] = uint32(2 * m) // segments: empty for ranks 0-2, 2m copies for rank 3
		}
		return t
	}
	for r := 0; r < cfg.WorldSize; r++ {
		c := cfg
		c.Rank = r
		p, err := a2a.NewPlanner(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.PlanRecv(table(1)); err != nil { // 4 copies each: within the bound
			t.Fatalf("rank %d within the bound: %v", r, err)
		}
		if r == 3 {
			if got := p.Recv().ExpertOffsets; got[0] != 0 || got[1] != 5 || got[2] != 10 {
				t.Fatalf("rank 3 offsets %v, want [0 5 10]", got)
			}
			if got := p.Recv().TokensPerExpert; got[0] != 4 || got[1] != 4 {
				t.Fatalf("rank 3 counts %v", got)
			}
		}
		if err := p.PlanRecv(table(2)); !errors.Is(err, a2a.ErrExpertOverflow) { // 8 copies each
			t.Fatalf("rank %d over the bound: %v, want ErrExpertOverflow", r, err)
		}
		if r != 3 {
			// Rank 3 masked out: its experts' counts no longer matter.
			if err := p.SetActive([]bool{true, true, true, false}); err != nil {
				t.Fatal(err)
			}
			if err := p.PlanRecv(table(2)); err != nil {
				t.Fatalf("rank %d, owner inactive: %v", r, err)
			}
		}
	}
}
