package a2a_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/host"
)

// poisonNode is a host.NodeMemory that remembers this rank's own transport
// buffers, so the test can overwrite them while every rank is idle.
type poisonNode struct {
	host.NodeMemory
	me         int // node-local index
	send, recv []byte
	// The transport buffers proper: a backend may keep more behind them
	// (the CUDA backend's sync slots follow its receive buffer), which
	// poisoning must leave alone.
	sendBytes, recvBytes int
}

func (p *poisonNode) Share(ctx context.Context, sendBytes, recvBytes int) ([][]byte, [][]byte, error) {
	send, recv, err := p.NodeMemory.Share(ctx, sendBytes, recvBytes)
	if err == nil {
		p.send, p.recv = send[p.me], recv[p.me]
	}
	return send, recv, err
}

// poison fills both buffers with a pattern that is neither a plausible
// token nor a count: 0xA5, then 0x5A, and so on.
func (p *poisonNode) poison(it int) {
	b := byte(0xa5)
	if it%2 == 1 {
		b = 0x5a
	}
	for _, buf := range [][]byte{p.send[:p.sendBytes], p.recv[:p.recvBytes]} {
		for i := range buf {
			buf[i] = b
		}
	}
}

// misuse calls what the state machine must refuse in state, on the real
// backend: each refusal is ErrCallOrder and changes nothing.
func misuse(ctx context.Context, c *a2a.Context, state string) error {
	var calls map[string]func() error
	in, dout := &a2a.DispatchInput{}, &a2a.DispatchOutput{}
	cin, cout := &a2a.CombineInput{}, &a2a.CombineOutput{}
	ds := func() error { return c.DispatchSend(ctx, in) }
	dr := func() error { return c.DispatchRecv(ctx, dout) }
	cs := func() error { return c.CombineSend(ctx, cin) }
	cr := func() error { return c.CombineRecv(ctx, cout) }
	switch state {
	case "idle":
		calls = map[string]func() error{"DispatchRecv": dr, "CombineSend": cs, "CombineRecv": cr}
	case "dispatch sent":
		calls = map[string]func() error{"DispatchSend": ds, "CombineSend": cs, "CombineRecv": cr}
	case "dispatched":
		calls = map[string]func() error{"DispatchSend": ds, "DispatchRecv": dr, "CombineRecv": cr}
	case "combine sent":
		calls = map[string]func() error{"DispatchSend": ds, "DispatchRecv": dr, "CombineSend": cs}
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, a2a.ErrCallOrder) {
			return fmt.Errorf("%s after %s: %v, want ErrCallOrder", name, state, err)
		}
	}
	return nil
}
