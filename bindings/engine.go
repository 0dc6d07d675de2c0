package main

/*
#include <string.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/gpu"
)

// engineObj is what an engine handle names: the engine plus the handles
// that belong to it, released when it closes.
type engineObj struct {
	e *fabric.Engine

	family // its region and imm counter handles; mu also guards owner
	// owner says which credit counter handle currently owns an immediate
	// value, so freeing a replaced counter does not remove its successor.
	owner map[uint32]uint64
}

func engineOf(h C.ferry_engine_t) (*engineObj, error) {
	return lookup[*engineObj](&handles, uint64(h), "engine")
}

// readConfig copies the caller's config, honouring its struct_size so a
// program built against an older, shorter ferry_config still works.
func readConfig(in *C.ferry_config) (C.ferry_config, error) {
	var cfg C.ferry_config
	if in == nil {
		return cfg, errInvalid("engine open", "nil config")
	}
	n := C.size_t(in.struct_size)
	if n < C.size_t(unsafe.Offsetof(cfg.nics)+unsafe.Sizeof(cfg.nics)) {
		return cfg, errInvalid("engine open", "config struct_size %d: call ferry_config_init", n)
	}
	n = min(n, C.size_t(unsafe.Sizeof(cfg)))
	C.memcpy(unsafe.Pointer(&cfg), unsafe.Pointer(in), n)
	return cfg, nil
}

// logger maps a ferry_config log level to the engine's logger and its
// LogLevel (the engine logs nothing below it).
func logger(level C.int32_t) (*slog.Logger, slog.Level, error) {
	var l slog.Level
	switch level {
	case C.FERRY_LOG_DEFAULT, C.FERRY_LOG_WARN:
		l = slog.LevelWarn
	case C.FERRY_LOG_DEBUG:
		l = slog.LevelDebug
	case C.FERRY_LOG_INFO:
		l = slog.LevelInfo
	case C.FERRY_LOG_ERROR:
		l = slog.LevelError
	case C.FERRY_LOG_NONE:
		return slog.New(slog.DiscardHandler), slog.LevelError + 1, nil
	default:
		return nil, 0, errInvalid("engine open", "log level %d", int32(level))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), l, nil
}

//export ferry_engine_open
func ferry_engine_open(in *C.ferry_config, timeoutMS C.int64_t, out *C.ferry_engine_t) (rc C.int) {
	defer guard(&rc)
	if out == nil {
		return fail(errInvalid("engine open", "nil output"))
	}
	cfg, err := readConfig(in)
	if err != nil {
		return fail(err)
	}
	log, level, err := logger(cfg.log_level)
	if err != nil {
		return fail(err)
	}
	var poll fabric.PollMode
	switch cfg.poll {
	case C.FERRY_POLL_ADAPTIVE:
		poll = fabric.PollAdaptive
	case C.FERRY_POLL_SPIN:
		poll = fabric.PollSpin
	default:
		return fail(errInvalid("engine open", "poll mode %d", int32(cfg.poll)))
	}
	if cfg.nics < 0 || cfg.nics > fabric.MaxNICs {
		return fail(errInvalid("engine open", "%d nics (1 to %d)", int32(cfg.nics), fabric.MaxNICs))
	}
	if cfg.queue_depth < 0 || cfg.send_buffers < 0 || cfg.send_buffer_size < 0 || cfg.handshake_timeout_ms < 0 || cfg.max_pending < 0 {
		return fail(errInvalid("engine open", "negative size or timeout"))
	}
	fc := fabric.Config{
		Transport:        goString(cfg.transport),
		Node:             goString(cfg.node),
		NICs:             int(cfg.nics),
		Poll:             poll,
		QueueDepth:       int(cfg.queue_depth),
		SendBuffers:      int(cfg.send_buffers),
		SendBufferSize:   int(cfg.send_buffer_size),
		HandshakeTimeout: time.Duration(cfg.handshake_timeout_ms) * time.Millisecond,
		MaxPending:       int(cfg.max_pending),
		RequestTimeout:   time.Duration(cfg.request_timeout_ms) * time.Millisecond,
		LivenessInterval: time.Duration(cfg.liveness_interval_ms) * time.Millisecond,
		StuckTimeout:     time.Duration(cfg.stuck_timeout_ms) * time.Millisecond,
		Logger:           log,
		LogLevel:         level,
	}
	if cfg.gpu_count < 0 || cfg.gpu_count > 64 || (cfg.gpu_count > 0 && cfg.gpus == nil) {
		return fail(errInvalid("engine open", "gpus: %d entries", int32(cfg.gpu_count)))
	}
	for _, g := range unsafe.Slice((*int32)(unsafe.Pointer(cfg.gpus)), int(cfg.gpu_count)) {
		if g < 0 {
			return fail(errInvalid("engine open", "gpus: ordinal %d", g))
		}
		fc.GPUs = append(fc.GPUs, int(g))
	}
	if len(fc.GPUs) > 0 {
		switch cfg.gpu_placement {
		case C.FERRY_GPU_PLACE_TOPOLOGY:
			if fc.Topology, err = gpu.Topology(); err != nil {
				return fail(fmt.Errorf("engine open: gpus: %w", err))
			}
		case C.FERRY_GPU_PLACE_FIRST_NICS:
			if fc.Groups, err = firstNICGroups(fc.GPUs, max(fc.NICs, 1)); err != nil {
				return fail(err)
			}
			fc.GPUs = nil
		default:
			return fail(errInvalid("engine open", "gpu_placement %d", int32(cfg.gpu_placement)))
		}
	}
	ctx, cancel, err := timeoutCtx("engine open", timeoutMS)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	e, err := fabric.Open(ctx, fc)
	if err != nil {
		if fc.Topology != nil && codeOf(err) == codeInternal {
			// The machine's topology could not place the GPUs (no NIC
			// near them, a GPU missing from the PCI tree).
			err = fmt.Errorf("%w (gpu_placement FERRY_GPU_PLACE_FIRST_NICS skips the topology): %w", err, fabric.ErrNotSupported)
		}
		return fail(err)
	}
	o := &engineObj{e: e, family: family{children: map[uint64]struct{}{}}, owner: map[uint32]uint64{}}
	*out = C.ferry_engine_t(handles.add(o))
	return C.int(codeOK)
}

func goString(p *C.char) string {
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

//export ferry_engine_close
func ferry_engine_close(h C.ferry_engine_t, timeoutMS C.int64_t) (rc C.int) {
	defer guard(&rc)
	ctx, cancel, err := timeoutCtx("engine close", timeoutMS)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	o, err := release[*engineObj](&handles, uint64(h), "engine")
	if err != nil {
		return fail(err)
	}
	return result(o.close(ctx))
}

// close closes the engine, then releases the handles that belong to it:
// after Close no worker or callback can touch them any more.
func (o *engineObj) close(ctx context.Context) error {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	err := o.e.Close(ctx)
	o.mu.Lock()
	for h := range o.children {
		handles.remove(h)
	}
	clear(o.children)
	clear(o.owner)
	o.mu.Unlock()
	if err != nil {
		return fmt.Errorf("engine close: %w", err)
	}
	return nil
}

//export ferry_engine_address
func ferry_engine_address(h C.ferry_engine_t, buf *C.uint8_t, cp C.size_t, n *C.size_t) (rc C.int) {
	defer guard(&rc)
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	b, _ := o.e.MainAddress().MarshalBinary()
	return result(copyBytes("engine address", b, unsafe.Pointer(buf), cp, n))
}

//export ferry_engine_address_hex
func ferry_engine_address_hex(h C.ferry_engine_t, buf *C.char, cp C.size_t, n *C.size_t) (rc C.int) {
	defer guard(&rc)
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	return result(copyText("engine address", o.e.MainAddress().String(), buf, cp, n))
}

//export ferry_engine_nics
func ferry_engine_nics(h C.ferry_engine_t, nics *C.int32_t) (rc C.int) {
	defer guard(&rc)
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	if nics == nil {
		return fail(errInvalid("engine nics", "nil output"))
	}
	*nics = C.int32_t(o.e.NICs())
	return C.int(codeOK)
}

// infoJSON is the shape of ferry_engine_info's text.
type infoJSON struct {
	Provider  string      `json:"provider"`
	Transport string      `json:"transport"`
	Reason    string      `json:"reason"`
	Poll      string      `json:"poll"`
	Main      string      `json:"main_address"`
	LinkSpeed uint64      `json:"link_speed_bps"`
	Groups    []groupJSON `json:"groups"`
}

type groupJSON struct {
	Device  string       `json:"device"`
	Pinned  bool         `json:"pinned"`
	CPU     int          `json:"cpu"`
	Domains []domainJSON `json:"domains"`
}

type domainJSON struct {
	Name    string `json:"name"`
	Address string `json:"address"`
}

//export ferry_engine_info
func ferry_engine_info(h C.ferry_engine_t, buf *C.char, cp C.size_t, n *C.size_t) (rc C.int) {
	defer guard(&rc)
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	in := o.e.Info()
	j := infoJSON{Provider: in.Provider, Transport: in.Transport, Reason: in.Reason, Poll: in.Poll.String(),
		Main: in.Main.String(), LinkSpeed: in.LinkSpeed}
	for _, g := range in.Groups {
		gj := groupJSON{Device: g.Device.String(), Pinned: g.Pinned, CPU: g.CPU}
		for _, d := range g.Domains {
			gj.Domains = append(gj.Domains, domainJSON{Name: d.Name, Address: d.Address.String()})
		}
		j.Groups = append(j.Groups, gj)
	}
	b, err := json.Marshal(j)
	if err != nil {
		return fail(fmt.Errorf("engine info: %w", err))
	}
	return result(copyText("engine info", string(b), buf, cp, n))
}

//export ferry_engine_stats
func ferry_engine_stats(h C.ferry_engine_t, out *C.ferry_stats) (rc C.int) {
	defer guard(&rc)
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	if out == nil {
		return fail(errInvalid("engine stats", "nil output"))
	}
	s := o.e.Stats()
	st := C.ferry_stats{completed: C.uint64_t(s.Completed), failed: C.uint64_t(s.Failed), unclaimed: C.uint64_t(s.Unclaimed)}
	for _, d := range s.Domains {
		st.posted += C.uint64_t(d.Posted)
		st.bytes += C.uint64_t(d.Bytes)
		st.imms += C.uint64_t(d.Imms)
	}
	*out = st
	return C.int(codeOK)
}

//export ferry_transports
func ferry_transports(buf *C.char, cp C.size_t, n *C.size_t) (rc C.int) {
	defer guard(&rc)
	var b strings.Builder
	for _, t := range fabric.Transports() {
		fmt.Fprintf(&b, "%s\t%s\n", t.Name, t.Provider)
	}
	return result(copyText("transports", b.String(), buf, cp, n))
}
