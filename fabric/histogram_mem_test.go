package fabric_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

// histOf returns e's histogram of op.
func histOf(t *testing.T, e *fabric.Engine, op string) fabric.TransferHistogram {
	t.Helper()
	for _, h := range e.TransferHistograms() {
		if h.Op == op {
			return h
		}
	}
	t.Fatalf("no histogram for %q", op)
	return fabric.TransferHistogram{}
}

// bucketAt returns the cumulative count at bound in bs.
func bucketAt(t *testing.T, bs []fabric.HistogramBucket, bound float64) uint64 {
	t.Helper()
	for _, b := range bs {
		if b.UpperBound == bound {
			return b.Count
		}
	}
	t.Fatalf("no bucket at %v", bound)
	return 0
}

// TestTransferHistograms: the histograms count the transfers that
// succeeded, by kind, with their sizes in the right buckets; a failed
// transfer is not counted.
func TestTransferHistograms(t *testing.T) {
	a, b := openMem(t, 2), openMem(t, 2)
	sbuf, err := fabric.AllocHost(1 << 20)
	require.NoError(t, err)
	defer sbuf.Free()
	dbuf, err := fabric.AllocHost(1 << 20)
	require.NoError(t, err)
	defer dbuf.Free()
	src, err := a.RegisterHost(sbuf, fabric.AccessLocal)
	require.NoError(t, err)
	dst, err := b.RegisterHost(dbuf, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	desc, err := dst.Descriptor()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wait := func(submit func(c fabric.Completion) error) error {
		t.Helper()
		tr := fabric.NewTransfer()
		if err := submit(fabric.Notify(tr)); err != nil {
			return err
		}
		return tr.Wait(ctx)
	}

	for _, h := range a.TransferHistograms() {
		require.Zero(t, h.Count, "%s before any transfer", h.Op)
		require.Equal(t, "mem", h.Transport)
	}
	for range 5 {
		require.NoError(t, wait(func(c fabric.Completion) error {
			return a.SubmitSingle(fabric.SingleWrite{Src: src, Dst: desc, Length: 1000}, c)
		}))
	}
	pages := []uint32{0, 1, 2, 3}
	for range 3 {
		require.NoError(t, wait(func(c fabric.Completion) error {
			return a.SubmitPaged(fabric.PagedWrite{Src: src, SrcPages: pages, SrcStride: 4096,
				Dst: desc, DstPages: pages, DstStride: 4096, Length: 4096}, c)
		}))
	}
	for range 2 {
		require.NoError(t, wait(func(c fabric.Completion) error {
			return a.SubmitImm(fabric.ImmWrite{Imm: 7, Dst: desc}, c)
		}))
	}
	// A write past the end of the target fails: not counted.
	require.Error(t, wait(func(c fabric.Completion) error {
		return a.SubmitSingle(fabric.SingleWrite{Src: src, Dst: desc, DstOffset: 1 << 20, Length: 10}, c)
	}))

	single := histOf(t, a, "single")
	require.EqualValues(t, 5, single.Count)
	require.EqualValues(t, 5000, single.SizeSum)
	require.Zero(t, bucketAt(t, single.Size, 512), "1000 B is above the 512 B bucket")
	require.EqualValues(t, 5, bucketAt(t, single.Size, 1024))
	require.EqualValues(t, 5, single.Latency[len(single.Latency)-1].Count, "every latency under the top bound")
	require.GreaterOrEqual(t, single.LatencySum, 0.0)

	paged := histOf(t, a, "paged")
	require.EqualValues(t, 3, paged.Count)
	require.EqualValues(t, 3*4*4096, paged.SizeSum)
	require.Zero(t, bucketAt(t, paged.Size, 8192))
	require.EqualValues(t, 3, bucketAt(t, paged.Size, 16384))

	imm := histOf(t, a, "imm")
	require.EqualValues(t, 2, imm.Count)
	require.Zero(t, imm.SizeSum)
	require.EqualValues(t, 2, imm.Size[0].Count, "immediates are 0 bytes")

	require.Zero(t, histOf(t, a, "scatter").Count)
	require.Zero(t, histOf(t, b, "single").Count, "the target counts nothing it did not submit")
	for _, h := range a.TransferHistograms() {
		for i := 1; i < len(h.Latency); i++ {
			require.LessOrEqual(t, h.Latency[i-1].Count, h.Latency[i].Count, "cumulative")
		}
		require.LessOrEqual(t, h.Size[len(h.Size)-1].Count, h.Count)
	}
}
