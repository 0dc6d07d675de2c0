package fabric_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

// The per-operation path pays for deadlines, liveness and back-pressure
// per pass, not per op: steady-state immediate and single writes allocate
// nothing, with the engine's default deadline, an explicit one, a context,
// and immediates nobody counts (held, settled once per pass).
func TestPerOpAllocations(t *testing.T) {
	e := openMem(t, 2)
	buf, err := fabric.AllocHost(1 << 16)
	require.NoError(t, err)
	defer buf.Free()
	src, err := e.RegisterHost(buf, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	desc, _ := src.Descriptor()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	tc := new(fabric.TransferCounter)
	tr := fabric.NewTransfer()
	var n int64
	// Targets of other NIC counts: a 2-NIC writer striping over 4 NICs
	// and folding onto 1 picks each write's NIC without allocating.
	wideDesc, narrowDesc := remoteDesc(t, 4), remoteDesc(t, 1)
	srcPages, dstPages := []uint32{0, 1, 2}, []uint32{2, 1, 0}
	targets := []fabric.ScatterTarget{{Dst: wideDesc, Length: 100}, {Dst: narrowDesc, Length: 100, DstOffset: 128}}
	for _, tt := range []struct {
		name string
		run  func()
	}{
		{"imm, counter, default deadline", func() {
			require.NoError(t, e.SubmitImm(fabric.ImmWrite{Imm: 7, Dst: desc}, fabric.Count(tc)))
			n++
			_ = tc.Wait(ctx, n)
		}},
		{"imm, counter, explicit deadline", func() {
			require.NoError(t, e.SubmitImm(fabric.ImmWrite{Imm: 7, Dst: desc},
				fabric.Count(tc).WithDeadline(time.Now().Add(time.Hour))))
			n++
			_ = tc.Wait(ctx, n)
		}},
		{"single, transfer, context", func() {
			require.NoError(t, e.SubmitSingle(fabric.SingleWrite{Src: src, Length: 64, Dst: desc, DstOffset: 64},
				fabric.Notify(tr).WithContext(ctx)))
			require.NoError(t, tr.Wait(ctx))
		}},
		{"single, 2 to 4 nics", func() {
			require.NoError(t, e.SubmitSingle(fabric.SingleWrite{Src: src, Length: 40000, Dst: wideDesc}, fabric.Notify(tr)))
			require.NoError(t, tr.Wait(ctx))
		}},
		{"paged, 2 to 1 nic", func() {
			require.NoError(t, e.SubmitPaged(fabric.PagedWrite{Src: src, SrcPages: srcPages, DstPages: dstPages,
				SrcStride: 256, DstStride: 256, Length: 64, Dst: narrowDesc}, fabric.Notify(tr)))
			require.NoError(t, tr.Wait(ctx))
		}},
		{"scatter shard bytes, 2 to 4 and 1 nics", func() {
			require.NoError(t, e.SubmitScatter(fabric.ScatterWrite{Src: src, Targets: targets, Route: fabric.ShardBytes()}, fabric.Notify(tr)))
			require.NoError(t, tr.Wait(ctx))
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for range 2000 { // warm the pools
				tt.run()
			}
			allocs := testing.AllocsPerRun(2000, tt.run)
			require.LessOrEqual(t, allocs, 0.05, "allocations per op in steady state")
		})
	}
	st := e.Stats()
	require.Positive(t, st.Unclaimed, "the immediates nobody counted were held")
}

// remoteDesc opens a mem engine of nics NICs and returns the descriptor
// of a 64 KiB region on it.
func remoteDesc(t *testing.T, nics int) fabric.Descriptor {
	e := openMem(t, nics)
	buf, err := fabric.AllocHost(1 << 16)
	require.NoError(t, err)
	t.Cleanup(func() { _ = buf.Free() })
	r, err := e.RegisterHost(buf, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	d, err := r.Descriptor()
	require.NoError(t, err)
	require.Len(t, d.NICs, nics)
	return d
}
