package rendezvous

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLateReportAfterLateInterrupt: a join whose deadline passed waits for
// rank 0's late report of the missing ranks, also when the callback that
// interrupts its read at the context's end runs only after that read ended
// at the connection's own deadline (a goroutine started late, as on a
// loaded machine): the callback must not cut the wait for the report short.
func TestLateReportAfterLateInterrupt(t *testing.T) {
	defer func(g time.Duration) { lateReportGrace = g }(lateReportGrace)
	lateReportGrace = 5 * time.Second // the report surely comes within it
	interrupting := make(chan struct{})
	delayInterrupt = func() {
		time.Sleep(100 * time.Millisecond) // the read ended at its deadline by now
		close(interrupting)
	}
	defer func() { delayInterrupt = nil }()

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	dl, _ := ctx.Deadline()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	served := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		if _, _, err := readFrame(c, 1<<10); err != nil {
			served <- err
			return
		}
		// The report comes after the deadline, and after the late
		// callback's when that runs: it does not when the read ends at
		// the connection's deadline before ctx's timer fires, the other
		// order of the two.
		select {
		case <-interrupting:
		case <-time.After(time.Until(dl) + 150*time.Millisecond):
		}
		time.Sleep(50 * time.Millisecond)
		_, err = c.Write(errMsg{code: codeTimeout, missing: []uint32{2}, msg: "join: deadline passed waiting for rank(s) [2]"}.encode())
		served <- err
		<-done
	}()
	defer close(done)

	g := &Group{cfg: Config{Rank: 1, WorldSize: 3, Token: tok}}
	err = g.connect(ctx, ln.Addr().String())
	if g.conn != nil {
		g.conn.Close()
	}
	require.ErrorIs(t, err, ErrTimeout)
	var re *Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, []int{2}, re.Missing, "the late report was not read: %v", err)
	require.NoError(t, <-served)
}
