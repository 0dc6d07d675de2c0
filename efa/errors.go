//go:build cgo

package efa

import (
	"errors"
	"fmt"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/ofi"
)

// errClosed is returned by every call on a closed Domain. Pre-allocated:
// the data path returns it without allocating.
var errClosed = fmt.Errorf("libfabric domain closed: %w", rdma.ErrClosed)

// callError turns a failed libfabric call into a *rdma.ProviderError
// (which wraps rdma.ErrProvider).
func callError(transport, op string, err error) error {
	pe := &rdma.ProviderError{Provider: providerLabel(transport), Op: op, Msg: err.Error()}
	var errno ofi.Errno
	if errors.As(err, &errno) {
		pe.Errno = int(errno)
		pe.Timeout = errno == ofi.ETIMEDOUT
	}
	var oe *ofi.OpenError
	if errors.As(err, &oe) {
		pe.Op = op + ": " + oe.Step
		pe.Msg = oe.Errno.Error()
	}
	return pe
}

func providerLabel(transport string) string {
	if transport == "" {
		return ProviderName
	}
	return ProviderName + "/" + transport
}

// errText remembers the text of one error completion until DescribeError
// asks for it. Error completions are rare, so a small ring searched from
// the newest entry is enough, and it cannot grow without bound when the
// engine never asks.
type errText struct {
	context   uint64
	errno     int32
	provErrno int32
	text      string
}

const errRingSize = 64

type errRing struct {
	buf  [errRingSize]errText
	next int
}

func (r *errRing) add(t errText) {
	r.buf[r.next%errRingSize] = t
	r.next++
}

func (r *errRing) find(ev rdma.Event) (string, bool) {
	for i := 1; i <= errRingSize && i <= r.next; i++ {
		t := &r.buf[(r.next-i)%errRingSize]
		if t.context == ev.Context && t.errno == ev.Errno && t.provErrno == ev.ProvErrno {
			return t.text, true
		}
	}
	return "", false
}
