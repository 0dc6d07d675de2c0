package reference_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/reference"
)

// Two ranks in two domains, 4 experts (two per rank), top-2, padding 2,
// one-byte tokens, one scale.
func tinyConfig() a2a.Config {
	return a2a.Config{WorldSize: 2, MaxTokens: 3, Hidden: 1, Scales: 1, DispatchType: a2a.FP8,
		CombineType: a2a.FP32, Experts: 4, ExpertsPerToken: 2, ExpertPadding: 2}
}

func tinyGroups() []reference.GroupInput {
	return []reference.GroupInput{
		{Tokens: 3, X: []byte{10, 11, 12}, Scales: []float32{0.5, 1.5, 2.5},
			Indices: []uint32{0, 2, 0, 1, 3, 2}, Weights: []float32{0.5, 0.5, 1, 2, 0.25, 0.75}},
		{Tokens: 1, X: []byte{20}, Scales: []float32{9}, Indices: []uint32{1, 0}, Weights: []float32{1, 1}},
	}
}

func TestDispatchByHand(t *testing.T) {
	d, err := reference.Dispatch(tinyConfig(), tinyGroups())
	if err != nil {
		t.Fatal(err)
	}
	// Rank 0 owns experts 0 and 1 and visits group 1 (other domain) first.
	// Expert 0: group 1 token 0 (slot 1), group 0 tokens 0 and 1 -> 3 rows,
	// padded to 4. Expert 1: group 1 token 0 (slot 0), group 0 token 1.
	r0 := d[0]
	if !reflect.DeepEqual(r0.ExpertTokens, []int32{3, 2}) || !reflect.DeepEqual(r0.ExpertOffset, []int32{0, 4, 6}) {
		t.Fatalf("rank 0 counts %v offsets %v", r0.ExpertTokens, r0.ExpertOffset)
	}
	if got := r0.X[:6]; !reflect.DeepEqual(got, []byte{20, 10, 11, 0, 20, 11}) {
		t.Fatalf("rank 0 rows %v", got)
	}
	if got := r0.Scales[:6]; !reflect.DeepEqual(got, []float32{9, 0.5, 1.5, 0, 9, 1.5}) {
		t.Fatalf("rank 0 scales %v", got)
	}
	if r0.Origin[3].Group != -1 || r0.Origin[0] != (reference.Copy{Group: 1, Token: 0, Slot: 1}) {
		t.Fatalf("rank 0 origins %v", r0.Origin[:6])
	}
	// Rank 1: expert 2 gets group 0 tokens 0 and 2; expert 3 token 2.
	r1 := d[1]
	if !reflect.DeepEqual(r1.ExpertTokens, []int32{2, 1}) || !reflect.DeepEqual(r1.X[:3], []byte{10, 12, 12}) {
		t.Fatalf("rank 1 %v %v", r1.ExpertTokens, r1.X[:3])
	}
}

func TestCombineByHand(t *testing.T) {
	cfg := tinyConfig()
	groups := tinyGroups()
	d, err := reference.Dispatch(cfg, groups)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := cfg.Layout()
	// Expert output = token byte value + 100*expert's rank, as fp32.
	ys := make([][]byte, 2)
	for r := range ys {
		ys[r] = make([]byte, l.OutputRows*4)
		for row := range l.OutputRows {
			a2a.EncodeFloat32(a2a.FP32, ys[r], row, float32(d[r].X[row])+float32(100*r))
		}
	}
	out, err := reference.Combine(cfg, groups, d, ys, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	// Group 0 token 1: experts 0 and 1 on rank 0, weights 1 and 2: 11 + 2*11 = 33.
	// Token 2: experts 3, 2 on rank 1, weights .25, .75: 112.
	want := []float32{0.5*10 + 0.5*110, 33, 112}
	for t0, w := range want {
		if got := a2a.DecodeFloat32(a2a.FP32, out[0], t0); got != w {
			t.Fatalf("group 0 token %d: %v want %v", t0, got, w)
		}
	}
	prev := [][]byte{append([]byte(nil), out[0]...), append([]byte(nil), out[1]...)}
	acc, err := reference.Combine(cfg, groups, d, ys, prev, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := a2a.DecodeFloat32(a2a.FP32, acc[0], 1); got != 66 {
		t.Fatalf("accumulated: %v", got)
	}
}

func TestReferenceRejects(t *testing.T) {
	cfg := tinyConfig()
	groups := tinyGroups()
	groups[1].Indices = []uint32{1, 7}
	if _, err := reference.Dispatch(cfg, groups); !errors.Is(err, a2a.ErrInvalidArgument) {
		t.Fatalf("bad expert: %v", err)
	}
	if _, err := reference.Dispatch(cfg, groups[:1]); !errors.Is(err, a2a.ErrInvalidArgument) {
		t.Fatalf("missing group: %v", err)
	}
	cfg.Experts = 0
	if _, err := reference.Dispatch(cfg, tinyGroups()); !errors.Is(err, a2a.ErrInvalidConfig) {
		t.Fatalf("bad config: %v", err)
	}
}

func TestVisitOrder(t *testing.T) {
	cfg := a2a.Config{WorldSize: 12, NVLinkSize: 4, ReplicaSize: 2, MaxTokens: 1, Hidden: 1,
		DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 12, ExpertsPerToken: 1}
	l, _ := cfg.Layout()
	// Rank 5: group 2, domain 1 (groups 2, 3). Other domains from domain 2:
	// groups 4, 5, then 0, 1; then own domain after group 2: 3; then 2.
	if got := fmt.Sprint(reference.VisitOrder(&l, 5)); got != "[4 5 0 1 3 2]" {
		t.Fatalf("order %s", got)
	}
}

func ExampleDispatch() {
	d, err := reference.Dispatch(tinyConfig(), tinyGroups())
	if err != nil {
		panic(err)
	}
	for r, out := range d {
		fmt.Println("rank", r, "tokens per expert", out.ExpertTokens, "segments", out.ExpertOffset)
	}
	// Output:
	// rank 0 tokens per expert [3 2] segments [0 4 6]
	// rank 1 tokens per expert [2 1] segments [0 2 4]
}

// The batched layout by hand: expert i's rows start at i*B (padding not
// used), OutputRows is L*B, and a count above B is ErrExpertOverflow.
func TestDispatchBatchedByHand(t *testing.T) {
	cfg := tinyConfig()
	cfg.MaxTokensPerExpert = 3
	d, err := reference.Dispatch(cfg, tinyGroups())
	if err != nil {
		t.Fatal(err)
	}
	r0 := d[0]
	if !reflect.DeepEqual(r0.ExpertTokens, []int32{3, 2}) || !reflect.DeepEqual(r0.ExpertOffset, []int32{0, 3, 6}) {
		t.Fatalf("rank 0 counts %v offsets %v", r0.ExpertTokens, r0.ExpertOffset)
	}
	if got := r0.X; !reflect.DeepEqual(got, []byte{20, 10, 11, 20, 11, 0}) {
		t.Fatalf("rank 0 rows %v", got)
	}
	if n := len(r0.Origin); n != 6 {
		t.Fatalf("%d output rows, want L*B = 6", n)
	}
	cfg.MaxTokensPerExpert = 2 // expert 0 gets 3 copies
	if _, err := reference.Dispatch(cfg, tinyGroups()); !errors.Is(err, a2a.ErrExpertOverflow) {
		t.Fatalf("over the bound: %v, want ErrExpertOverflow", err)
	}
}
