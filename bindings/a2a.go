package main

/*
#include <string.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/cudabackend"
	"github.com/ferryrdma/ferry/a2a/cudabackend/emulated"
	"github.com/ferryrdma/ferry/a2a/host"
	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/rendezvous"
)

// The all-to-all behind ferry_a2a_t: an a2a.Context over one of the
// backends, plus what the C calls keep between the halves of an
// iteration (the token count of the dispatch, its drop report).

// a2aObj is what an a2a handle names.
type a2aObj struct {
	// mu serialises the calls on one context; a second caller gets
	// FERRY_E_BUSY rather than waiting (the Go Context does the same).
	mu      sync.Mutex
	c       *a2a.Context
	l       *a2a.Layout
	backend int32
	// release frees what the context needs beside its backend: an engine
	// the context opened, a CUDA context, node memory of a local world.
	release []func() error
	// tokens is m of the current iteration, set by the dispatch send.
	tokens int
	dout   a2a.DispatchOutput // reused: only its drop report outlives a call
	gen    uint32
	// st stages CUDA tensors through host memory; cuda holds the primary
	// context of each GPU such tensors came from.
	st   stager
	cuda map[int]*cuda.Context
}

// cFieldOf names the ferry_a2a_config field behind an a2a.Config field,
// so a bad config is reported in the caller's terms.
var cFieldOf = map[string]string{
	"WorldSize": "world_size", "Rank": "rank", "NVLinkSize": "nvlink_size", "ReplicaSize": "replica_size",
	"NICsPerGPU": "nics_per_rank", "MaxTokens": "max_tokens", "Hidden": "hidden", "Scales": "hidden_scales",
	"Experts": "num_experts", "ExpertsPerToken": "experts_per_token", "ExpertPadding": "expert_padding",
	"PrivateTokens": "max_private_tokens", "DispatchType": "dispatch_dtype", "CombineType": "combine_dtype",
	"MaxTokensPerExpert": "max_tokens_per_expert", "ImmBase": "imm_base",
}

// dtypeOf maps a FERRY_DTYPE_* of the config to a2a's element types.
func dtypeOf(v C.int32_t) a2a.DType {
	switch v {
	case C.FERRY_DTYPE_FP8:
		return a2a.FP8
	case C.FERRY_DTYPE_BF16:
		return a2a.BF16
	case C.FERRY_DTYPE_FP16:
		return a2a.FP16
	case C.FERRY_DTYPE_FP32:
		return a2a.FP32
	}
	return a2a.DTypeInvalid
}

// readA2AConfig copies the caller's config, honouring its struct_size.
func readA2AConfig(in *C.ferry_a2a_config) (C.ferry_a2a_config, error) {
	var cfg C.ferry_a2a_config
	if in == nil {
		return cfg, errInvalid("a2a create", "cfg: nil")
	}
	n := C.size_t(in.struct_size)
	if n < C.size_t(unsafe.Offsetof(cfg.timeout_ms)+unsafe.Sizeof(cfg.timeout_ms)) {
		return cfg, errInvalid("a2a create", "cfg: struct_size %d: call ferry_a2a_config_init", n)
	}
	n = min(n, C.size_t(unsafe.Sizeof(cfg)))
	C.memcpy(unsafe.Pointer(&cfg), unsafe.Pointer(in), n)
	return cfg, nil
}

// localWorld is the meeting point of the contexts of one process that
// share a world_name: an all-gather for their descriptors and the node
// memory of each NVLink domain.
type localWorld struct {
	size   int
	nodes  []*host.LocalNode
	joined int
	ranks  []bool // which ranks joined

	mu     sync.Mutex
	rounds []*gatherRound
}

type gatherRound struct {
	data  [][]byte
	n     int
	ready chan struct{}
}

var localWorlds struct {
	mu sync.Mutex
	m  map[string]*localWorld
}

// joinLocalWorld returns the world named name, making it on first use.
// Once all its members have joined, the name is free for another world.
func joinLocalWorld(name string, cfg a2a.Config, l *a2a.Layout) (*localWorld, error) {
	localWorlds.mu.Lock()
	defer localWorlds.mu.Unlock()
	if localWorlds.m == nil {
		localWorlds.m = map[string]*localWorld{}
	}
	w := localWorlds.m[name]
	if w == nil {
		w = &localWorld{size: cfg.WorldSize, nodes: make([]*host.LocalNode, l.Nodes), ranks: make([]bool, cfg.WorldSize)}
		for i := range w.nodes {
			w.nodes[i] = host.NewLocalNode(l.NVLinkSize)
		}
		localWorlds.m[name] = w
	}
	if w.size != cfg.WorldSize || len(w.nodes) != l.Nodes {
		return nil, errInvalid("a2a create", "world_name %q: world_size %d, but its first member said %d", name, cfg.WorldSize, w.size)
	}
	if w.ranks[cfg.Rank] {
		return nil, errInvalid("a2a create", "rank %d: world_name %q already has a rank %d", cfg.Rank, name, cfg.Rank)
	}
	w.ranks[cfg.Rank] = true
	w.joined++
	if w.joined == w.size {
		delete(localWorlds.m, name)
	}
	return w, nil
}

// localMember is one rank's side of a localWorld's all-gathers.
type localMember struct {
	w     *localWorld
	rank  int
	round int
}

func (m *localMember) AllGather(ctx context.Context, data []byte) ([][]byte, error) {
	w := m.w
	w.mu.Lock()
	for len(w.rounds) <= m.round {
		w.rounds = append(w.rounds, &gatherRound{data: make([][]byte, w.size), ready: make(chan struct{})})
	}
	r := w.rounds[m.round]
	m.round++
	r.data[m.rank] = append([]byte(nil), data...)
	r.n++
	if r.n == w.size {
		close(r.ready)
	}
	w.mu.Unlock()
	select {
	case <-r.ready:
		return r.data, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("a2a world all-gather: %w", fabric.ErrTimeout)
	}
}

//export ferry_a2a_create
func ferry_a2a_create(in *C.ferry_a2a_config, timeoutMS C.int64_t, out *C.ferry_a2a_t) (rc C.int) {
	defer guard(&rc)
	if out == nil {
		return fail(errInvalid("a2a create", "out: nil"))
	}
	ctx, cancel, err := timeoutCtx("a2a create", timeoutMS)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	o, err := newA2A(ctx, in)
	if err != nil {
		return fail(err)
	}
	*out = C.ferry_a2a_t(handles.add(o))
	return C.int(codeOK)
}

func newA2A(ctx context.Context, in *C.ferry_a2a_config) (_ *a2aObj, err error) {
	const op = "a2a create"
	cc, err := readA2AConfig(in)
	if err != nil {
		return nil, err
	}
	cfg := a2a.Config{Rank: int(cc.rank), WorldSize: int(cc.world_size), NVLinkSize: int(cc.nvlink_size),
		ReplicaSize: int(cc.replica_size), NICsPerGPU: int(cc.nics_per_rank), MaxTokens: int(cc.max_tokens),
		Hidden: int(cc.hidden), Scales: int(cc.hidden_scales), DispatchType: dtypeOf(cc.dispatch_dtype),
		CombineType: dtypeOf(cc.combine_dtype), Experts: int(cc.num_experts), ExpertsPerToken: int(cc.experts_per_token),
		ExpertPadding: int(cc.expert_padding), PrivateTokens: int(cc.max_private_tokens),
		MaxTokensPerExpert: int(cc.max_tokens_per_expert), ImmBase: uint32(cc.imm_base)}
	if cc.timeout_ms < 0 {
		return nil, errInvalid(op, "timeout_ms: %d (want >= 0)", int64(cc.timeout_ms))
	}
	timeout := time.Duration(cc.timeout_ms) * time.Millisecond
	switch cc.backend {
	case C.FERRY_A2A_BACKEND_HOST, C.FERRY_A2A_BACKEND_CUDA, C.FERRY_A2A_BACKEND_CUDA_EMU:
	default:
		return nil, errInvalid(op, "backend: %d (FERRY_A2A_BACKEND_HOST, _CUDA or _CUDA_EMU)", int32(cc.backend))
	}

	// The world: a bootstrap group, or threads of this process.
	var g *rendezvous.Group
	if cc.group != 0 {
		if g, err = groupOf(cc.group); err != nil {
			return nil, fmt.Errorf("%s: group: %w", op, err)
		}
		if (cc.world_size != 0 && int(cc.world_size) != g.WorldSize()) || (cc.rank != 0 && int(cc.rank) != g.Rank()) {
			return nil, errInvalid(op, "rank %d of world_size %d, but the group says rank %d of %d",
				int32(cc.rank), int32(cc.world_size), g.Rank(), g.WorldSize())
		}
		cfg.Rank, cfg.WorldSize = g.Rank(), g.WorldSize()
	} else if cc.world_name == nil || C.strlen(cc.world_name) == 0 {
		return nil, errInvalid(op, "world_name: empty: name the world of explicit ranks (or pass a group)")
	}
	l, err := cfg.Layout()
	if err != nil {
		var ce *a2a.ConfigError
		if errors.As(err, &ce) && cFieldOf[ce.Field] != "" {
			return nil, fmt.Errorf("%s: %s = %d: %s: %w", op, cFieldOf[ce.Field], ce.Value, ce.Reason, fabric.ErrInvalidArgument)
		}
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	o := &a2aObj{l: &l, backend: int32(cc.backend)}
	defer func() {
		if err != nil {
			err = errors.Join(err, o.releaseAll())
		}
	}()

	// The engine: the caller's, or one of the context's own.
	var eng *fabric.Engine
	if cc.engine != 0 {
		eo, err := engineOf(cc.engine)
		if err != nil {
			return nil, fmt.Errorf("%s: engine: %w", op, err)
		}
		eng = eo.e
	} else {
		eng, err = fabric.Open(ctx, fabric.Config{Transport: goString(cc.transport), Node: goString(cc.node),
			NICs: l.NICsPerGPU})
		if err != nil {
			return nil, fmt.Errorf("%s: open engine: %w", op, err)
		}
		o.release = append(o.release, func() error {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return eng.Close(cctx)
		})
	}

	// Joined only once nothing but the backend can fail: a rank that
	// gave up before must not count as a member of the world.
	var ex a2a.Exchanger
	var lw *localWorld
	if g != nil {
		ex = g
	} else {
		if lw, err = joinLocalWorld(C.GoString(cc.world_name), cfg, &l); err != nil {
			return nil, err
		}
		ex = &localMember{w: lw, rank: cfg.Rank}
	}

	me := cfg.Rank % l.NVLinkSize
	var b a2a.Backend
	switch cc.backend {
	case C.FERRY_A2A_BACKEND_HOST:
		var node host.NodeMemory
		if lw != nil {
			node = lw.nodes[l.Node(cfg.Rank)].Member(me)
		} else if node, err = host.NewProcessNode(cfg, g); err != nil {
			return nil, fmt.Errorf("%s: node memory: %w", op, err)
		}
		b, err = host.New(ctx, cfg, host.Options{Engine: eng, Exchange: ex, Node: node, Timeout: timeout})
	case C.FERRY_A2A_BACKEND_CUDA_EMU:
		dev := emulated.NewDevice()
		copt := cudabackend.Options{Engine: eng, Exchange: ex, Device: dev, Timeout: timeout}
		if lw != nil {
			copt.Node = emulated.NewHostNode(lw.nodes[l.Node(cfg.Rank)].Member(me), me)
		} else if copt.Node, err = cudabackend.NewProcessNode(cfg, g, dev); err != nil {
			return nil, fmt.Errorf("%s: node memory: %w", op, err)
		}
		b, err = cudabackend.New(ctx, cfg, copt)
	case C.FERRY_A2A_BACKEND_CUDA:
		b, err = o.newCUDA(ctx, cfg, &l, eng, ex, g, int(cc.cuda_device), timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if o.c, err = a2a.New(cfg, b); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	o.l = o.c.Layout()
	o.dout.DroppedExperts = make([]int32, l.Experts)
	return o, nil
}

// newCUDA builds the CUDA backend on this rank's GPU.
func (o *a2aObj) newCUDA(ctx context.Context, cfg a2a.Config, l *a2a.Layout, eng *fabric.Engine, ex a2a.Exchanger,
	g *rendezvous.Group, ordinal int, timeout time.Duration) (a2a.Backend, error) {
	n, err := cuda.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("backend cuda: %w", err)
	}
	if n == 0 {
		return nil, fmt.Errorf("backend cuda: no CUDA device: %w", fabric.ErrNotSupported)
	}
	if ordinal < 0 {
		ordinal = cfg.Rank
		if g != nil {
			ordinal = g.LocalRank()
		}
		ordinal %= n
	}
	d, err := cuda.GetDevice(ordinal)
	if err != nil {
		return nil, fmt.Errorf("backend cuda: cuda_device: %w", err)
	}
	cctx, err := d.PrimaryContext()
	if err != nil {
		return nil, fmt.Errorf("backend cuda: %w", err)
	}
	o.release = append(o.release, cctx.Close)
	dev, err := cudabackend.NewDriverDevice(cctx)
	if err != nil {
		return nil, fmt.Errorf("backend cuda: %w", err)
	}
	copt := cudabackend.Options{Engine: eng, Exchange: ex, Device: dev, Timeout: timeout}
	switch {
	case l.NVLinkSize == 1:
		copt.Node = cudabackend.NewLocalNode(dev, 1).Member(0)
	case g == nil:
		return nil, fmt.Errorf("backend cuda: nvlink_size %d needs one process per rank (a group): %w", l.NVLinkSize, fabric.ErrNotSupported)
	default:
		if copt.Node, err = cudabackend.NewProcessNode(cfg, g, dev); err != nil {
			return nil, fmt.Errorf("backend cuda: node memory: %w", err)
		}
	}
	return cudabackend.New(ctx, cfg, copt)
}

// releaseAll runs the release functions, last made first.
func (o *a2aObj) releaseAll() error {
	var errs []error
	for i := len(o.release) - 1; i >= 0; i-- {
		errs = append(errs, o.release[i]())
	}
	o.release = nil
	return errors.Join(errs...)
}

func a2aOf(h C.ferry_a2a_t) (*a2aObj, error) {
	return lookup[*a2aObj](&handles, uint64(h), "a2a")
}

// enter looks up the context and takes its call lock.
func enter(op string, h C.ferry_a2a_t) (*a2aObj, error) {
	o, err := a2aOf(h)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if !o.mu.TryLock() {
		return nil, fmt.Errorf("%s: another call runs on this context: %w", op, a2a.ErrBusy)
	}
	return o, nil
}

// enterCall begins a dispatch or combine: takes the context's call lock
// and checks the arguments every such call shares. On success the caller
// unlocks o.mu and calls cancel.
func enterCall(op string, h C.ferry_a2a_t, doSend, doRecv C.int32_t, stream C.uint64_t,
	timeoutMS C.int64_t) (*a2aObj, context.Context, context.CancelFunc, error) {
	o, err := enter(op, h)
	if err != nil {
		return nil, nil, nil, err
	}
	switch {
	case doSend == 0 && doRecv == 0:
		err = errInvalid(op, "do_send and do_recv both 0: nothing to do")
	case stream != 0:
		err = fmt.Errorf("%s: stream: calls on backend %d return when done; device-side launches are not in this version: %w",
			op, o.backend, fabric.ErrNotSupported)
	}
	var ctx context.Context
	var cancel context.CancelFunc
	if err == nil {
		ctx, cancel, err = timeoutCtx(op, timeoutMS)
	}
	if err != nil {
		o.mu.Unlock()
		return nil, nil, nil, err
	}
	o.st.reset(o)
	return o, ctx, cancel, nil
}

//export ferry_a2a_get_info
func ferry_a2a_get_info(h C.ferry_a2a_t, info *C.ferry_a2a_info) (rc C.int) {
	defer guard(&rc)
	const op = "a2a info"
	o, err := a2aOf(h)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", op, err))
	}
	if info == nil {
		return fail(errInvalid(op, "info: nil"))
	}
	n := uintptr(info.struct_size)
	var full C.ferry_a2a_info
	if n < unsafe.Offsetof(full.struct_size)+unsafe.Sizeof(full.struct_size) {
		return fail(errInvalid(op, "info: struct_size %d: set it to sizeof(ferry_a2a_info)", n))
	}
	l := o.l
	full = C.ferry_a2a_info{struct_size: C.uint32_t(min(n, unsafe.Sizeof(full))), rank: C.int32_t(l.Rank),
		world_size: C.int32_t(l.WorldSize), local_experts: C.int32_t(l.LocalExperts), output_rows: C.int32_t(l.OutputRows),
		max_tokens_per_expert: C.int32_t(l.MaxTokensPerExpert), token_bytes: C.int32_t(l.TokenBytes),
		combine_bytes: C.int32_t(l.CombineBytes), private_tokens: C.int32_t(l.Private), backend: C.int32_t(o.backend),
		generation: C.uint32_t(o.c.Generation())}
	C.memcpy(unsafe.Pointer(info), unsafe.Pointer(&full), C.size_t(full.struct_size))
	return C.int(codeOK)
}

//export ferry_a2a_dispatch
func ferry_a2a_dispatch(h C.ferry_a2a_t, outCounts, outX, outScales, x, scales, indices, weights, boundM *C.ferry_tensor,
	doSend, doRecv C.int32_t, stream C.uint64_t, timeoutMS C.int64_t) (rc C.int) {
	defer guard(&rc)
	o, ctx, cancel, err := enterCall("a2a dispatch", h, doSend, doRecv, stream, timeoutMS)
	if err != nil {
		return fail(err)
	}
	defer o.mu.Unlock()
	defer cancel()
	st := &o.st
	l := o.l
	var in a2a.DispatchInput
	if doSend != 0 {
		if in, err = dispatchInput(st, l, x, scales, indices, weights, boundM); err != nil {
			return fail(err)
		}
	}
	if doRecv != 0 {
		if err := dispatchOutput(st, l, &o.dout, outCounts, outX, outScales); err != nil {
			return fail(err)
		}
	}
	if doSend != 0 {
		if err := o.c.DispatchSend(ctx, &in); err != nil {
			return fail(err)
		}
		o.tokens = in.Tokens
	}
	if doRecv != 0 {
		if err := o.c.DispatchRecv(ctx, &o.dout); err != nil {
			return fail(err)
		}
	}
	return result(st.flush("a2a dispatch"))
}

// dispatchInput checks the send half's tensors and views them.
func dispatchInput(st *stager, l *a2a.Layout, x, scales, indices, weights, boundM *C.ferry_tensor) (a2a.DispatchInput, error) {
	const op = "a2a dispatch"
	var in a2a.DispatchInput
	H, K := int64(l.Hidden), int64(l.ExpertsPerToken)
	xt, err := st.tensorArg(op, "dp_x", x, dispatchTypes(l.DispatchType), 2)
	if err != nil {
		return in, err
	}
	mMax := xt.shape[0]
	if mMax > int64(l.MaxTokens) {
		return in, errInvalid(op, "dp_x: %d tokens, max_tokens is %d", mMax, l.MaxTokens)
	}
	if err := xt.rows(H); err != nil {
		return in, err
	}
	in.Tokens, in.X, in.XStride = int(mMax), xt.bytes(), int(xt.strides[0])*xt.esize
	if err := st.scaleArg(op, "dp_x_scale", scales, l, mMax, &in.Scales, &in.ScaleTokenStride, &in.ScaleElemStride); err != nil {
		return in, err
	}
	it, err := st.tensorArg(op, "indices", indices, []C.int32_t{C.FERRY_DTYPE_INT32, C.FERRY_DTYPE_UINT32}, 2)
	if err != nil {
		return in, err
	}
	if err := it.packed(mMax, K); err != nil {
		return in, err
	}
	in.Indices = unsafe.Slice((*uint32)(it.p), int(mMax*K))
	if weights != nil {
		wt, err := st.tensorArg(op, "weights", weights, []C.int32_t{C.FERRY_DTYPE_FP32}, 2)
		if err != nil {
			return in, err
		}
		if wt.shape[0] != mMax || wt.shape[1] != K {
			return in, errInvalid(op, "weights: shape %v, want [%d, %d]", wt.shape, mMax, K)
		}
	}
	if boundM != nil {
		m, err := st.boundArg(op, boundM)
		if err != nil {
			return in, err
		}
		if m < 0 || int64(m) > mMax {
			return in, errInvalid(op, "bound_m: %d tokens, not in [0, %d] (dp_x's rows)", m, mMax)
		}
		in.Tokens = int(m)
	}
	return in, nil
}

// dispatchOutput checks the receive half's tensors and points out at them.
func dispatchOutput(st *stager, l *a2a.Layout, out *a2a.DispatchOutput, counts, x, scales *C.ferry_tensor) error {
	const op = "a2a dispatch"
	ct, err := st.tensorArg(op, "out_expert_num_tokens", counts, []C.int32_t{C.FERRY_DTYPE_INT32}, 1)
	if err != nil {
		return err
	}
	if ct.shape[0] != int64(l.LocalExperts) || ct.strides[0] != 1 {
		return errInvalid(op, "out_expert_num_tokens: shape %v strides %v, want [%d] packed", ct.shape, ct.strides, l.LocalExperts)
	}
	out.ExpertTokens = unsafe.Slice((*int32)(ct.p), l.LocalExperts)
	xt, err := st.expertRows(op, "out_expert_x", x, dispatchTypes(l.DispatchType), l, int64(l.Hidden), false)
	if err != nil {
		return err
	}
	out.X, out.XStride = xt.bytes(), xt.rowStride()*xt.esize
	out.Scales, out.ScaleTokenStride, out.ScaleElemStride = nil, 0, 0
	if l.Scales == 0 {
		if scales != nil {
			return errInvalid(op, "out_expert_x_scale: given, but hidden_scales is 0")
		}
		return nil
	}
	sv, err := st.expertRows(op, "out_expert_x_scale", scales, []C.int32_t{C.FERRY_DTYPE_FP32}, l, int64(l.Scales), true)
	if err != nil {
		return err
	}
	out.Scales = sv.floats()
	out.ScaleTokenStride, out.ScaleElemStride = int(sv.rowStride()), int(sv.strides[sv.ndim-1])
	if out.ScaleTokenStride == 0 || out.ScaleElemStride == 0 {
		return errInvalid(op, "out_expert_x_scale: zero stride")
	}
	return nil
}

//export ferry_a2a_combine
func ferry_a2a_combine(h C.ferry_a2a_t, out, indices, weights, y, boundM *C.ferry_tensor,
	doSend, doRecv, accumulate C.int32_t, stream C.uint64_t, timeoutMS C.int64_t) (rc C.int) {
	defer guard(&rc)
	const op = "a2a combine"
	o, ctx, cancel, err := enterCall(op, h, doSend, doRecv, stream, timeoutMS)
	if err != nil {
		return fail(err)
	}
	defer o.mu.Unlock()
	defer cancel()
	st := &o.st
	l := o.l
	var cin a2a.CombineInput
	if doSend != 0 {
		yt, err := st.expertRows(op, "expert_y", y, []C.int32_t{combineType(l.CombineType)}, l, int64(l.Hidden), false)
		if err != nil {
			return fail(err)
		}
		cin.Y, cin.YStride = yt.bytes(), yt.rowStride()*yt.esize
	}
	var cout a2a.CombineOutput
	if doRecv != 0 {
		if cout, err = combineOutput(st, l, o.tokens, out, indices, weights, boundM); err != nil {
			return fail(err)
		}
		cout.Accumulate = accumulate != 0
	}
	if doSend != 0 {
		if err := o.c.CombineSend(ctx, &cin); err != nil {
			return fail(err)
		}
	}
	if doRecv != 0 {
		if err := o.c.CombineRecv(ctx, &cout); err != nil {
			return fail(err)
		}
	}
	return result(st.flush(op))
}

// combineOutput checks the receive half's tensors for m tokens.
func combineOutput(st *stager, l *a2a.Layout, m int, out, indices, weights, boundM *C.ferry_tensor) (a2a.CombineOutput, error) {
	const op = "a2a combine"
	var cout a2a.CombineOutput
	H, K := int64(l.Hidden), int64(l.ExpertsPerToken)
	ot, err := st.tensorArg(op, "out_tokens", out, []C.int32_t{combineType(l.CombineType)}, 2)
	if err != nil {
		return cout, err
	}
	if ot.shape[0] < int64(m) {
		return cout, errInvalid(op, "out_tokens: %d rows, the dispatch had %d tokens", ot.shape[0], m)
	}
	if err := ot.rows(H); err != nil {
		return cout, err
	}
	cout.Out, cout.OutStride = ot.bytes(), int(ot.strides[0])*ot.esize
	wt, err := st.tensorArg(op, "weights", weights, []C.int32_t{C.FERRY_DTYPE_FP32}, 2)
	if err != nil {
		return cout, err
	}
	if wt.shape[0] < int64(m) {
		return cout, errInvalid(op, "weights: %d rows, the dispatch had %d tokens", wt.shape[0], m)
	}
	if err := wt.packed(wt.shape[0], K); err != nil {
		return cout, err
	}
	cout.Weights = unsafe.Slice((*float32)(wt.p), m*int(K))
	if indices != nil {
		it, err := st.tensorArg(op, "indices", indices, []C.int32_t{C.FERRY_DTYPE_INT32, C.FERRY_DTYPE_UINT32}, 2)
		if err != nil {
			return cout, err
		}
		if it.shape[0] < int64(m) || it.shape[1] != K {
			return cout, errInvalid(op, "indices: shape %v, want [>= %d, %d]", it.shape, m, K)
		}
	}
	if boundM != nil {
		bm, err := st.boundArg(op, boundM)
		if err != nil {
			return cout, err
		}
		if int(bm) != m {
			return cout, errInvalid(op, "bound_m: %d tokens, but the dispatch had %d", bm, m)
		}
	}
	return cout, nil
}

//export ferry_a2a_dropped
func ferry_a2a_dropped(h C.ferry_a2a_t, dropped *C.int64_t, perExpert *C.int32_t, n C.size_t) (rc C.int) {
	defer guard(&rc)
	const op = "a2a dropped"
	o, err := enter(op, h)
	if err != nil {
		return fail(err)
	}
	defer o.mu.Unlock()
	if perExpert != nil && int(n) < o.l.Experts {
		return fail(errInvalid(op, "per_expert: %d entries, num_experts is %d", uint64(n), o.l.Experts))
	}
	if dropped != nil {
		*dropped = C.int64_t(o.dout.Dropped)
	}
	if perExpert != nil {
		copy(unsafe.Slice((*int32)(unsafe.Pointer(perExpert)), o.l.Experts), o.dout.DroppedExperts)
	}
	return C.int(codeOK)
}

//export ferry_a2a_set_active
func ferry_a2a_set_active(h C.ferry_a2a_t, gen C.uint32_t, active *C.uint8_t, n C.size_t, timeoutMS C.int64_t) (rc C.int) {
	defer guard(&rc)
	const op = "a2a set active"
	o, err := enter(op, h)
	if err != nil {
		return fail(err)
	}
	defer o.mu.Unlock()
	W := o.l.WorldSize
	if active == nil || int(n) != W {
		return fail(errInvalid(op, "active: %d entries, world_size is %d", uint64(n), W))
	}
	ctx, cancel, err := timeoutCtx(op, timeoutMS)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	m := a2a.Membership{Generation: uint32(gen), Active: make([]bool, W)}
	for q, v := range unsafe.Slice((*uint8)(unsafe.Pointer(active)), W) {
		m.Active[q] = v != 0
	}
	return result(o.c.SetActiveRanks(ctx, m))
}

//export ferry_a2a_close
func ferry_a2a_close(h C.ferry_a2a_t) (rc C.int) {
	defer guard(&rc)
	o, err := release[*a2aObj](&handles, uint64(h), "a2a")
	if err != nil {
		return fail(fmt.Errorf("a2a close: %w", err))
	}
	// A call still running on another thread holds mu; its waits are
	// bounded by its timeout.
	o.mu.Lock()
	defer o.mu.Unlock()
	return result(errors.Join(o.c.Close(), o.releaseAll()))
}
