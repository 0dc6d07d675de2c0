//go:build unix

package shm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Send writes msg on c with duplicates of fds attached (SCM_RIGHTS); the
// caller keeps its own descriptors. It waits for room in the socket at
// most until ctx ends (the error then wraps ErrTimeout). msg must not be
// empty: a receiver's read may drop a message that carries only files.
func Send(ctx context.Context, c *net.UnixConn, msg []byte, fds ...int) error {
	if c == nil || len(msg) == 0 {
		return fmt.Errorf("send %d files with %d bytes: %w", len(fds), len(msg), unix.EINVAL)
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	stop := bound(ctx, c.SetWriteDeadline)
	n, oobn, err := c.WriteMsgUnix(msg, oob, nil)
	stop()
	if err != nil {
		return fmt.Errorf("send %d files: %w", len(fds), ended(ctx, err))
	}
	if n != len(msg) || oobn != len(oob) {
		return fmt.Errorf("send %d files: short write (%d of %d bytes, %d of %d control bytes)", len(fds), n, len(msg), oobn, len(oob))
	}
	return nil
}

// Receive reads one message into buf and returns its length and the
// descriptors that came with it (at most maxFDs, owned by the caller). It
// waits at most until ctx ends (the error then wraps ErrTimeout). A
// message longer than buf or carrying more than maxFDs descriptors is an
// error wrapping ErrMalformed, and whatever descriptors arrived are
// closed: on every error the caller owns none. A zero length with no
// error is the peer's orderly close (on stream sockets) or an empty
// message.
func Receive(ctx context.Context, c *net.UnixConn, buf []byte, maxFDs int) (n int, fds []int, err error) {
	if c == nil || maxFDs < 0 {
		return 0, nil, fmt.Errorf("receive files: %w", unix.EINVAL)
	}
	// Room for one descriptor more than allowed, so that a sender of too
	// many is told apart from a truncation of the kernel's own.
	oob := make([]byte, unix.CmsgSpace(4*(maxFDs+1)))
	stop := bound(ctx, c.SetReadDeadline)
	n, oobn, flags, _, rerr := c.ReadMsgUnix(buf, oob)
	stop()
	fds, perr := parseRights(oob[:oobn])
	switch {
	case rerr != nil:
		err = fmt.Errorf("receive files: %w", ended(ctx, rerr))
	case perr != nil || flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 || len(fds) > maxFDs:
		err = fmt.Errorf("receive files: %d bytes, %d files (at most %d), flags %#x, %v: %w", n, len(fds), maxFDs, flags, perr, ErrMalformed)
	}
	if err != nil {
		CloseAll(fds)
		return 0, nil, err
	}
	return n, fds, nil
}

// CloseAll closes every descriptor of fds.
func CloseAll(fds []int) {
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
}

// parseRights returns every descriptor in a control message buffer (the
// ones parsed before a failure too, for the caller to close).
func parseRights(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	var errs []error
	for i := range msgs {
		got, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fds = append(fds, got...)
	}
	return fds, errors.Join(errs...)
}

// bound makes a blocking call on a connection return when ctx ends: its
// deadline becomes the connection's, and a cancellation moves the
// connection's deadline into the past. stop undoes both, and returns only
// once a cancellation that raced it has finished, so a later call never
// sees a stale deadline.
//
// A context that never ends leaves the connection's deadline alone.
func bound(ctx context.Context, set func(time.Time) error) (stop func()) {
	dl, ok := ctx.Deadline()
	if ok {
		_ = set(dl)
	}
	if ctx.Done() == nil {
		if !ok {
			return func() {}
		}
		return func() { _ = set(time.Time{}) }
	}
	fired := make(chan struct{})
	after := context.AfterFunc(ctx, func() {
		_ = set(time.Unix(1, 0))
		close(fired)
	})
	return func() {
		if !after() {
			<-fired
		}
		_ = set(time.Time{})
	}
}

// ended turns a deadline error, or any error once ctx ended, into one
// wrapping ErrTimeout (and ctx's error when it has one).
func ended(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w: %w (%w)", ErrTimeout, err, cerr)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	return err
}
