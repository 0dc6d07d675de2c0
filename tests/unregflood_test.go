package tests

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric"
)

// Unregister during a flood, across processes: a target process
// unregisters the region another process floods with writes. What must
// hold on every transport: the target's Unregister returns (nil, or a
// typed error); its own later submits from that region fail at once with
// ErrUnknownRegion; its memory can be written and freed afterwards; every
// write of the flood ends (succeeded, or failed with a typed error) well
// within its deadline, and no submit blocks past it.

const unregBuf = 8 << 20

// runUnregTarget is the target: it prints its region's descriptor, then
// follows the commands on stdin.
func runUnregTarget() error {
	p := paramsFromEnv()
	e, err := fabric.Open(context.Background(), p.config())
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			fmt.Printf("CLOSE %v\n", err)
		}
	}()
	buf, err := fabric.AllocHost(unregBuf)
	if err != nil {
		return err
	}
	r, err := e.RegisterHost(buf, targetAccess())
	if err != nil {
		return err
	}
	desc, err := r.Descriptor()
	if err != nil {
		return err
	}
	db, err := desc.MarshalBinary()
	if err != nil {
		return err
	}
	fmt.Printf("DESC %s\n", hex.EncodeToString(db))
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "unregister":
			start := time.Now()
			uerr := e.Unregister(r)
			fmt.Printf("UNREG %v in %v\n", uerr, time.Since(start).Round(time.Millisecond))
			if uerr != nil && !errors.Is(uerr, fabric.ErrProvider) && !errors.Is(uerr, fabric.ErrTimeout) {
				return fmt.Errorf("unregister: untyped error: %w", uerr)
			}
			// Its own submits from the region fail at once.
			serr := e.SubmitSingle(fabric.SingleWrite{Src: r, Length: 8, Dst: desc}, fabric.Notify(fabric.NewTransfer()))
			if !errors.Is(serr, fabric.ErrUnknownRegion) {
				return fmt.Errorf("submit from the unregistered region: %v, want ErrUnknownRegion", serr)
			}
			// The memory is the program's again.
			b := buf.Bytes()
			for i := range b {
				b[i] = 0xA5
			}
			if err := buf.Free(); err != nil {
				return fmt.Errorf("free after unregister: %w", err)
			}
			fmt.Println("REUSED")
		case "fill 7":
			for i := range buf.Bytes() {
				buf.Bytes()[i] = pattern(7, i)
			}
			fmt.Println("FILLED")
		case "check 7":
			// Every byte as the writer's source has it (pattern 7).
			res := "ok"
			for i, b := range buf.Bytes() {
				if b != pattern(7, i) {
					res = fmt.Sprintf("byte %d is %#x, want %#x", i, b, pattern(7, i))
					break
				}
			}
			fmt.Printf("CHECK %s\n", res)
		case "quit":
			return nil
		}
	}
	return nil
}

func TestUnregisterDuringFlood(t *testing.T) {
	for _, tr := range []struct{ transport, node string }{{"shm", ""}, {"ipc", ""}, {"tcp;ofi_rxm", "127.0.0.1"}} {
		t.Run(tr.transport, func(t *testing.T) {
			unregisterDuringFlood(t, params{transport: tr.transport, node: tr.node, nics: 1})
		})
	}
}

// unregisterDuringFlood: 64 KiB writes, at most 256 in flight
// (unregisterUnderFlood). libfabric's shm either copies them itself,
// checking no key, and fails those into unmapped memory with error
// completions that name no operation, or its target drops them
// unanswered: either way they end at their deadline, ErrTimeout
// (efa/doc.go). tcp;ofi_rxm may have connected again by the later write
// (the peer was lost, not for good), and a write into an unknown key can
// then complete there successfully (tcp completes once sent; its target
// drops the write and the connection again); shm's later writes can
// complete too (its cross-memory copy checks no key) or end at their
// deadline (README, efa/doc.go "Unregistered regions").
func unregisterDuringFlood(t *testing.T, p params) {
	e, _, sr := openFlooder(t, p)
	tg := startTarget(t, p, false)
	const chunk = 64 << 10
	unregisterUnderFlood(t, p.transport, "write", e, tg, 256, writeChunks(e, sr, tg.desc, chunk))
}
