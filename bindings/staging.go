//go:build cgo

package main

import (
	"fmt"
	"unsafe"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/fabric"
)

// stager stages the CUDA tensors of one dispatch or combine call through
// host memory: each is copied out of the GPU before the call (inputs, and
// outputs too, whose rows the call does not write must keep their
// contents), and the outputs are copied back after it succeeded. It costs
// a copy each way per call; the backends then see host memory, as with
// host tensors. The buffers are kept per argument and grown, so a steady
// shape allocates nothing after the first call.
type stager struct {
	o    *a2aObj
	bufs map[string][]byte
	outs []stagedOut
}

type stagedOut struct {
	ctx  *cuda.Context
	dev  cuda.DevicePtr
	host []byte
}

// outputArgs are the arguments a call writes.
var outputArgs = map[string]bool{
	"out_expert_num_tokens": true, "out_expert_x": true, "out_expert_x_scale": true, "out_tokens": true,
}

// reset starts a call of o.
func (st *stager) reset(o *a2aObj) {
	st.o = o
	st.outs = st.outs[:0]
}

// stage copies v's bytes out of GPU ordinal's memory into the argument's
// host buffer and points v at it.
func (st *stager) stage(op string, v *tensor, ordinal int) error {
	if st == nil || st.o == nil {
		return fmt.Errorf("%s: %s: CUDA device memory is not accepted here: %w", op, v.name, fabric.ErrNotSupported)
	}
	if ordinal < 0 {
		return errInvalid(op, "%s: device %d", v.name, ordinal)
	}
	ctx, err := st.o.cudaContext(ordinal)
	if err != nil {
		return fmt.Errorf("%s: %s: CUDA device memory: %w", op, v.name, err)
	}
	n := int(v.extent)
	if st.bufs == nil {
		st.bufs = map[string][]byte{}
	}
	buf := st.bufs[v.name]
	if cap(buf) < n {
		buf = make([]byte, n)
		st.bufs[v.name] = buf
	}
	buf = buf[:n]
	dev := cuda.DevicePtr(uintptr(v.p))
	if n > 0 {
		if err := ctx.CopyDtoH(buf, dev); err != nil {
			return fmt.Errorf("%s: %s: copy from cuda:%d: %w", op, v.name, ordinal, err)
		}
		v.p = unsafe.Pointer(unsafe.SliceData(buf))
	}
	if outputArgs[v.name] && n > 0 {
		st.outs = append(st.outs, stagedOut{ctx: ctx, dev: dev, host: buf})
	}
	return nil
}

// flush copies the staged outputs back to their GPUs.
func (st *stager) flush(op string) error {
	for _, s := range st.outs {
		if err := s.ctx.CopyHtoD(s.dev, s.host); err != nil {
			return fmt.Errorf("%s: copy the result to the GPU: %w", op, err)
		}
	}
	st.outs = st.outs[:0]
	return nil
}

// cudaContext returns GPU ordinal's primary context, retained until the
// context closes.
func (o *a2aObj) cudaContext(ordinal int) (*cuda.Context, error) {
	if c := o.cuda[ordinal]; c != nil {
		return c, nil
	}
	d, err := cuda.GetDevice(ordinal)
	if err != nil {
		return nil, err
	}
	c, err := d.PrimaryContext()
	if err != nil {
		return nil, err
	}
	if o.cuda == nil {
		o.cuda = map[int]*cuda.Context{}
	}
	o.cuda[ordinal] = c
	o.release = append(o.release, c.Close)
	return c, nil
}
