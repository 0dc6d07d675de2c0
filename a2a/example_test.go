package a2a_test

import (
	"fmt"

	"github.com/ferryrdma/ferry/a2a"
)

// A decode-shaped configuration: 16 ranks in two NVLink domains of 8, FP8
// tokens with 56 block scales, BF16 combine, 256 experts, top-8.
func ExampleConfig_Layout() {
	cfg := a2a.Config{
		WorldSize: 16, Rank: 0, NVLinkSize: 8, NICsPerGPU: 2,
		MaxTokens: 128, Hidden: 7168, Scales: 56, DispatchType: a2a.FP8, CombineType: a2a.BF16,
		Experts: 256, ExpertsPerToken: 8,
	}
	l, err := cfg.Layout()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("experts per rank:", l.LocalExperts)
	fmt.Println("private window:", l.Private)
	fmt.Println("row stride:", l.Stride())
	fmt.Println("output rows:", l.OutputRows)
	// Output:
	// experts per rank: 16
	// private window: 64
	// row stride: 14336
	// output rows: 16384
}

// Planning one rank's side of a dispatch by hand: PlanSend from its own
// routing, PlanRecv once every group's count row is known.
func ExamplePlanner() {
	cfg := a2a.Config{WorldSize: 2, Rank: 0, MaxTokens: 2, Hidden: 4, DispatchType: a2a.BF16,
		CombineType: a2a.BF16, Experts: 4, ExpertsPerToken: 2, PrivateTokens: 1}
	routing := [][]uint32{{0, 2, 3, 1}, {2, 0}} // group 0: 2 tokens, group 1: 1 token
	tokens := []int{2, 1}

	table := make([]uint32, 0)
	var mine *a2a.Planner
	for r := range 2 {
		c := cfg
		c.Rank = r
		p, err := a2a.NewPlanner(c)
		if err != nil {
			fmt.Println(err)
			return
		}
		if err := p.PlanSend(routing[r], tokens[r]); err != nil {
			fmt.Println(err)
			return
		}
		table = append(table, p.Send().Row...) // what the count exchange delivers
		if r == 0 {
			mine = p
		}
	}
	sp := mine.Send()
	for i := range sp.Tokens * cfg.ExpertsPerToken {
		c := sp.Copy(i)
		fmt.Printf("copy %d: row %d to rank %d via %v\n", i, c.Pos, c.Dest, c.Path)
	}
	if err := mine.PlanRecv(table); err != nil {
		fmt.Println(err)
		return
	}
	rp := mine.Recv()
	fmt.Println("tokens per expert:", rp.TokensPerExpert, "overflow writes:", len(sp.Overflow))
	fmt.Println("dispatch immediates expected:", rp.Imm[a2a.TagDispatch].Expected)
	// Output:
	// copy 0: row 0 to rank 0 via self
	// copy 1: row 2 to rank 1 via rdma-eager
	// copy 2: row 3 to rank 1 via rdma-overflow
	// copy 3: row 1 to rank 0 via self
	// tokens per expert: [2 1] overflow writes: 1
	// dispatch immediates expected: 1
}

func ExampleBF16FromFloat32() {
	// 1 + 2^-8 lies exactly between two bfloat16 values: it rounds to the
	// even one (1.0); a hair above rounds up.
	fmt.Printf("%#04x %#04x\n", a2a.BF16FromFloat32(1+1.0/256), a2a.BF16FromFloat32(1+1.0/256+1.0/65536))
	fmt.Println(a2a.BF16ToFloat32(0x3f81), a2a.FP16ToFloat32(a2a.FP16FromFloat32(65520)))
	// Output:
	// 0x3f80 0x3f81
	// 1.0078125 +Inf
}

// Planning with an inactive rank: of 4 ranks (2 experts each), rank 2 is
// lost. Rank 0's copies for experts 4 and 5 are dropped, nobody waits for
// rank 2 (3 members: 2 barrier immediates), and group 2's count row is
// not expected.
func ExamplePlanner_SetActive() {
	cfg := a2a.Config{WorldSize: 4, Rank: 0, MaxTokens: 2, Hidden: 4, DispatchType: a2a.BF16,
		CombineType: a2a.BF16, Experts: 8, ExpertsPerToken: 2}
	p, err := a2a.NewPlanner(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := p.SetActive([]bool{true, true, false, true}); err != nil {
		fmt.Println(err)
		return
	}
	if err := p.PlanSend([]uint32{4, 1, 7, 5}, 2); err != nil {
		fmt.Println(err)
		return
	}
	sp := p.Send()
	for i := range 4 {
		c := sp.Copy(i)
		fmt.Printf("copy %d: to rank %d via %v\n", i, c.Dest, c.Path)
	}
	fmt.Println("dropped:", sp.Dropped, "count rows to:", sp.Routes)
	m := p.Members()
	fmt.Println("members:", m.Count, "others:", m.Others, "live groups:", m.Live)
	// Output:
	// copy 0: to rank 2 via dropped
	// copy 1: to rank 0 via self
	// copy 2: to rank 3 via rdma-eager
	// copy 3: to rank 2 via dropped
	// dropped: 2 count rows to: [1 3]
	// members: 3 others: [1 3] live groups: 3
}
