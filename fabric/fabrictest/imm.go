package fabrictest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

// testImm: one immediate per Imm write, on the round-robin NIC and pinned
// to every NIC (the descriptor entry used must be the NIC's own).
func testImm(t *testing.T, p Params) {
	env := NewEnv(t, p)
	imms := Collect(env.B)
	require.NoError(t, Wait(t, func(c fabric.Completion) error {
		return env.A.SubmitImm(fabric.ImmWrite{Imm: 0xBEADBEEF, Dst: env.Desc}, c)
	}))
	imms.WaitTotal(t, 1)
	require.Equal(t, 1, imms.Count(0xBEADBEEF))
	for d := 0; d < p.NICs; d++ {
		require.NoError(t, Wait(t, func(c fabric.Completion) error {
			return env.A.SubmitImm(fabric.ImmWrite{Imm: uint32(100 + d), Dst: env.Desc, Route: fabric.Pinned(d)}, c)
		}))
	}
	imms.WaitTotal(t, int64(1+p.NICs))
	for d := 0; d < p.NICs; d++ {
		require.Equal(t, 1, imms.Count(uint32(100+d)))
	}
	Settle()
	require.EqualValues(t, 1+p.NICs, imms.n.Load())
}

// testBarrier: one immediate per destination, sharded and pinned.
func testBarrier(t *testing.T, p Params) {
	env := NewEnv(t, p)
	imms := Collect(env.B)
	dsts := make([]fabric.Descriptor, 7)
	for i := range dsts {
		dsts[i] = env.Desc
	}
	require.NoError(t, Wait(t, func(c fabric.Completion) error {
		return env.A.SubmitBarrier(fabric.Barrier{Imm: 55, Dsts: dsts}, c)
	}))
	imms.WaitTotal(t, 7)
	for d := 0; d < p.NICs; d++ {
		require.NoError(t, Wait(t, func(c fabric.Completion) error {
			return env.A.SubmitBarrier(fabric.Barrier{Imm: 56, Dsts: dsts[:3], Route: fabric.Pinned(d)}, c)
		}))
	}
	imms.WaitTotal(t, int64(7+3*p.NICs))
	Settle()
	require.Equal(t, 7, imms.Count(55))
	require.Equal(t, 3*p.NICs, imms.Count(56))
}

// testImmCount reproduces the reference's count test: expect 10, receive
// 17 zero-length pages per group: the callback runs once and 7 immediates
// are replayed to OnImm.
func testImmCount(t *testing.T, p Params) {
	env := NewEnv(t, p)
	imms := Collect(env.B)
	var fired atomic.Int32
	_, had, err := env.B.ExpectImm(0xABC, 10, func() bool { fired.Add(1); return false })
	require.NoError(t, err)
	require.False(t, had)
	idx := make([]uint32, 17)
	require.NoError(t, Wait(t, func(c fabric.Completion) error {
		return env.A.SubmitPaged(fabric.PagedWrite{Src: env.SrcReg, SrcPages: idx, Dst: env.Desc, DstPages: idx,
			Length: 0, Imm: fabric.Immediate(0xABC)}, c)
	}))
	imms.WaitTotal(t, 7)
	Settle()
	require.EqualValues(t, 1, fired.Load())
	require.Equal(t, 7, imms.Count(0xABC))

	// Repeating counter: fires every 5, twice for 10 arrivals, nothing replayed.
	_, _, err = env.B.ExpectImm(0xABD, 5, func() bool { fired.Add(1); return true })
	require.NoError(t, err)
	idx = make([]uint32, 10)
	require.NoError(t, Wait(t, func(c fabric.Completion) error {
		return env.A.SubmitPaged(fabric.PagedWrite{Src: env.SrcReg, SrcPages: idx, Dst: env.Desc, DstPages: idx,
			Length: 0, Imm: fabric.Immediate(0xABD)}, c)
	}))
	deadline := time.Now().Add(Timeout)
	for fired.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	require.EqualValues(t, 3, fired.Load())
	prev, had := env.B.RemoveImmCount(0xABD)
	require.True(t, had)
	require.EqualValues(t, 0, prev.Count)
	require.EqualValues(t, 5, prev.Expected)
	_, _, err = env.B.ExpectImm(1, 0, func() bool { return false })
	require.ErrorIs(t, err, fabric.ErrInvalidArgument)
}

// testCredit: Wait(n) credits early arrivals, waits for late ones, and a
// cancelled wait gives its credits back.
func testCredit(t *testing.T, p Params) {
	env := NewEnv(t, p)
	ctr, err := env.B.ImmCounter(0x77)
	require.NoError(t, err)
	send := func(n int) {
		idx := make([]uint32, n)
		require.NoError(t, Wait(t, func(c fabric.Completion) error {
			return env.A.SubmitPaged(fabric.PagedWrite{Src: env.SrcReg, SrcPages: idx, Dst: env.Desc, DstPages: idx,
				Imm: fabric.Immediate(0x77)}, c)
		}))
	}
	send(5) // early arrivals
	require.NoError(t, ctr.Wait(Ctx(t), 3))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	err = ctr.Wait(ctx, 10) // only 2 credits left: times out
	cancel()
	require.ErrorIs(t, err, fabric.ErrTimeout)
	require.True(t, errors.Is(err, context.DeadlineExceeded))
	done := make(chan error, 1)
	go func() { done <- ctr.Wait(Ctx(t), 6) }()
	time.Sleep(5 * time.Millisecond)
	send(4)
	require.NoError(t, <-done)
	require.EqualValues(t, 0, ctr.Count())
	// Replacing the counter fails the old one's waits.
	_, err = env.B.ImmCounter(0x77)
	require.NoError(t, err)
	require.ErrorIs(t, ctr.Wait(Ctx(t), 1), fabric.ErrRemoved)
}

// testFlag: the flag is raised when an armed Wait's immediates arrive,
// at once if they already did.
func testFlag(t *testing.T, p Params) {
	env := NewEnv(t, p)
	var flag fabric.HostFlag
	fc, err := env.B.FlagCounter(0x88, &flag)
	require.NoError(t, err)
	idx := make([]uint32, 3)
	sendAll := func() {
		require.NoError(t, Wait(t, func(c fabric.Completion) error {
			return env.A.SubmitPaged(fabric.PagedWrite{Src: env.SrcReg, SrcPages: idx, Dst: env.Desc, DstPages: idx,
				Imm: fabric.Immediate(0x88)}, c)
		}))
	}
	require.NoError(t, fc.Wait(3))
	require.False(t, flag.IsSet())
	sendAll()
	require.NoError(t, flag.Wait(Ctx(t)))
	sendAll() // early: 3 credits banked
	deadline := time.Now().Add(Timeout)
	for fc.Count() < 3 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
	require.NoError(t, fc.Wait(2))
	require.True(t, flag.IsSet())
	flag.Clear()
	require.EqualValues(t, 1, fc.Count())
}
