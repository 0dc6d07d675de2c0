package fabric_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

func TestExpectedImms(t *testing.T) {
	for _, c := range []struct {
		s    fabric.Shape
		n, m int
		want int
	}{
		{fabric.ImmShape(), 4, 1, 1},
		{fabric.BarrierShape(3), 2, 4, 3},
		{fabric.SingleShape(fabric.Sharded(0)), 2, 2, 2},
		{fabric.SingleShape(fabric.Sharded(0)), 1, 4, 4},
		{fabric.SingleShape(fabric.Sharded(0)), 4, 2, 4},
		{fabric.SingleShape(fabric.Sharded(3)), 1, 4, 3},
		{fabric.SingleShape(fabric.Sharded(3)), 2, 2, 0}, // refused: more shards than NICs
		{fabric.SingleShape(fabric.Pinned(1)), 2, 1, 1},
		{fabric.PagedShape(7), 4, 1, 7},
		{fabric.ScatterShape(fabric.ShardPeers(), 5), 4, 2, 5},
		{fabric.ScatterShape(fabric.ScatterPinned(0), 5), 1, 4, 5},
		{fabric.ScatterShape(fabric.ShardBytes(), 5), 4, 1, 20},
		{fabric.ScatterShape(fabric.ShardBytes(), 5), 1, 4, 5},
		{fabric.ImmShape(), 0, 1, 0},
		{fabric.ImmShape(), 1, fabric.MaxNICs + 1, 0},
	} {
		require.Equal(t, c.want, fabric.ExpectedImms(c.s, c.n, c.m), "%+v %d to %d", c.s, c.n, c.m)
	}
	w := fabric.SingleWrite{Route: fabric.Sharded(0)}
	require.Zero(t, fabric.ExpectedImms(w.Shape(), 2, 4), "no immediate without an Imm")
	w.Imm = fabric.Immediate(0)
	require.Equal(t, 4, fabric.ExpectedImms(w.Shape(), 2, 4))
}
