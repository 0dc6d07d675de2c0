package a2a_test

import (
	"errors"
	"testing"

	"github.com/ferryrdma/ferry/a2a"
)

func validConfig() a2a.Config {
	return a2a.Config{
		WorldSize: 16, Rank: 3, NVLinkSize: 8, ReplicaSize: 2, NICsPerGPU: 2,
		MaxTokens: 128, Hidden: 7168, Scales: 56, DispatchType: a2a.FP8, CombineType: a2a.BF16,
		Experts: 256, ExpertsPerToken: 8, ExpertPadding: 16,
	}
}

func TestConfigValidation(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, c := range []struct {
		field string
		mod   func(*a2a.Config)
	}{
		{"WorldSize", func(c *a2a.Config) { c.WorldSize = 0 }},
		{"WorldSize", func(c *a2a.Config) { c.WorldSize = a2a.MaxWorldSize + 1 }},
		{"Rank", func(c *a2a.Config) { c.Rank = 16 }},
		{"Rank", func(c *a2a.Config) { c.Rank = -1 }},
		{"NVLinkSize", func(c *a2a.Config) { c.NVLinkSize = 3 }},
		{"NVLinkSize", func(c *a2a.Config) { c.NVLinkSize = 32 }},
		{"ReplicaSize", func(c *a2a.Config) { c.ReplicaSize = 3 }},
		{"ReplicaSize", func(c *a2a.Config) { c.ReplicaSize = 16 }}, // larger than a domain
		{"NICsPerGPU", func(c *a2a.Config) { c.NICsPerGPU = 5 }},
		{"MaxTokens", func(c *a2a.Config) { c.MaxTokens = 0 }},
		{"Hidden", func(c *a2a.Config) { c.Hidden = 0 }},
		{"Scales", func(c *a2a.Config) { c.Scales = -1 }},
		{"Scales", func(c *a2a.Config) { c.Scales = 7169 }},
		{"DispatchType", func(c *a2a.Config) { c.DispatchType = a2a.DTypeInvalid }},
		{"DispatchType", func(c *a2a.Config) { c.DispatchType = 99 }},
		{"CombineType", func(c *a2a.Config) { c.CombineType = a2a.FP8 }},
		{"CombineType", func(c *a2a.Config) { c.CombineType = a2a.DTypeInvalid }},
		{"Experts", func(c *a2a.Config) { c.Experts = 0 }},
		{"ExpertsPerToken", func(c *a2a.Config) { c.ExpertsPerToken = 0 }},
		{"ExpertsPerToken", func(c *a2a.Config) { c.Experts, c.ExpertsPerToken = 4, 5 }},
		{"ExpertPadding", func(c *a2a.Config) { c.ExpertPadding = -1 }},
		{"PrivateTokens", func(c *a2a.Config) { c.PrivateTokens = -2 }},
		{"ImmBase", func(c *a2a.Config) { c.ImmBase = ^uint32(0) - 2 }},
		{"ImmBase", func(c *a2a.Config) { c.ImmBase = ^uint32(0) - uint32(a2a.NumTags*a2a.ImmBanks) + 2 }},
		{"MaxTokens", func(c *a2a.Config) { c.MaxTokens, c.Hidden = a2a.MaxTokensPerRank, a2a.MaxHidden }},
	} {
		cfg := validConfig()
		c.mod(&cfg)
		err := cfg.Validate()
		var ce *a2a.ConfigError
		if !errors.Is(err, a2a.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%s: got %v", c.field, err)
		}
		if _, err := a2a.NewPlanner(cfg); !errors.Is(err, a2a.ErrInvalidConfig) {
			t.Errorf("%s: NewPlanner accepted it: %v", c.field, err)
		}
	}
}

func TestLayoutDerived(t *testing.T) {
	l, err := validConfig().Layout()
	if err != nil {
		t.Fatal(err)
	}
	// G = 8, L = 16, default M = floor(ceil(128*8/256) * 1.2) * 16 = 4*16.
	if l.Groups != 8 || l.Nodes != 2 || l.GroupsPerNode != 4 || l.LocalExperts != 16 || l.Private != 64 {
		t.Fatalf("topology: %+v", l)
	}
	if l.TokenBytes != 7168 || l.ScaleBytes != 224 || l.DispatchRow != 7168+224 || l.CombineRow != 14336 {
		t.Fatalf("rows: %d %d %d %d", l.TokenBytes, l.ScaleBytes, l.DispatchRow, l.CombineRow)
	}
	if l.Stride() != 14336 || l.MaxCopiesFrom != 128*8 {
		t.Fatalf("stride %d copies %d", l.Stride(), l.MaxCopiesFrom)
	}
	// Receive: a window of T*min(K,L) rows per group, 8*1024 (>= T*K); send:
	// max(T*K, G*T*min(K,L));
	// output: 8192 copies + L*(pad-1) = 240 padding rows, rounded to 16.
	if l.OutputRows != 8432 || l.RecvRows != 8192 || l.SendRows != 8192 {
		t.Fatalf("rows: recv %d send %d out %d", l.RecvRows, l.SendRows, l.OutputRows)
	}
	if l.RecvBytes%4096 != 0 || l.RecvBytes < int64(l.RecvRows*l.Stride()) {
		t.Fatalf("recv bytes %d", l.RecvBytes)
	}
	if l.RowWords != 256+16+1 || l.CountTableBytes != 8*273*4 {
		t.Fatalf("count table %d %d", l.RowWords, l.CountTableBytes)
	}
	if l.Imm(a2a.TagRoute, 0) != 0x80000000 || l.Imm(a2a.TagCombineBarrier, 0) != 0x80000004 ||
		l.Imm(a2a.TagRoute, 1) != 0x80000000+uint32(a2a.NumTags) || l.Imm(a2a.TagJoin, a2a.ImmBanks) != 0x80000000+uint32(a2a.TagJoin) {
		t.Fatalf("imm %#x", l.Imm(a2a.TagRoute, 0))
	}
	if lo, hi := l.ExpertRange(15); lo != 240 || hi != 256 {
		t.Fatalf("range %d %d", lo, hi)
	}
}

func TestLayoutDefaultsAndCorners(t *testing.T) {
	// Zero values mean 1 / default.
	cfg := a2a.Config{WorldSize: 3, MaxTokens: 10, Hidden: 3, DispatchType: a2a.FP16, CombineType: a2a.FP32,
		Experts: 7, ExpertsPerToken: 3}
	l, err := cfg.Layout()
	if err != nil {
		t.Fatal(err)
	}
	if l.NVLinkSize != 1 || l.ReplicaSize != 1 || l.NICsPerGPU != 1 || l.ExpertPadding != 1 || l.ImmBase != 0x80000000 {
		t.Fatalf("defaults: %+v", l.Config)
	}
	// L = 3; default M = floor(ceil(30/7) * 1.2) * 3 = floor(6) * 3 = 18,
	// capped at what a group can send one rank: 10*min(3,3) = 30.
	if l.LocalExperts != 3 || l.Private != 18 {
		t.Fatalf("L %d M %d", l.LocalExperts, l.Private)
	}
	// Rank 2 owns experts [6, 7) only.
	if lo, hi := l.ExpertRange(2); lo != 6 || hi != 7 {
		t.Fatalf("range %d %d", lo, hi)
	}
	// Rows are padded to 16 bytes even for odd token sizes.
	if l.TokenBytes != 6 || l.DispatchRow != 16 || l.CombineRow != 16 {
		t.Fatalf("rows %d %d %d", l.TokenBytes, l.DispatchRow, l.CombineRow)
	}
	cfg.PrivateTokens = a2a.NoPrivateWindow
	if l, _ := cfg.Layout(); l.Private != 0 {
		t.Fatalf("no window: %d", l.Private)
	}
	cfg.PrivateTokens = 1 << 20
	if l, _ := cfg.Layout(); l.Private != 30 {
		t.Fatalf("window cap: %d", l.Private)
	}
	// Ranks without experts: E < W.
	cfg = a2a.Config{WorldSize: 8, MaxTokens: 1, Hidden: 1, DispatchType: a2a.FP8, CombineType: a2a.BF16,
		Experts: 5, ExpertsPerToken: 1}
	l, err = cfg.Layout()
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := l.ExpertRange(7); lo != hi {
		t.Fatalf("rank 7 owns [%d, %d)", lo, hi)
	}
	// One group with fewer local experts than K: the buffers still hold the
	// T*K rows of the sender's layout (the reference's sizing did not).
	cfg = a2a.Config{WorldSize: 4, NVLinkSize: 4, ReplicaSize: 4, MaxTokens: 8, Hidden: 1, DispatchType: a2a.FP8,
		CombineType: a2a.BF16, Experts: 8, ExpertsPerToken: 4}
	l, _ = cfg.Layout()
	if l.SendRows < 32 || l.RecvRows < 32 {
		t.Fatalf("send %d recv %d rows for T*K = 32", l.SendRows, l.RecvRows)
	}
}
