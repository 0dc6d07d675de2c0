package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/ferryrdma/ferry/bench/internal/a2abench"
	"github.com/ferryrdma/ferry/bench/internal/report"
)

// deviceRecord is one row of a one-device run: a mode of one case. Its
// latency statistics are of whole steps of every rank.
type deviceRecord struct {
	Tokens int    `json:"tokens"`
	Mode   string `json:"mode"`
	report.Measure
	// Phases are the lock step's dispatch send, dispatch recv, combine
	// send and combine recv of every rank (absent in other modes).
	Phases []report.Stats `json:"phases_us,omitempty"`
	// RankUs is the step's p50 over the number of ranks.
	RankUs float64 `json:"rank_us"`
	// Bytes is what a step of every rank reads and writes in device memory
	// at least; FloorUs is it over the device's copy bandwidth and XHBM the
	// step's p50 over that (GPU only; 0 elsewhere).
	Bytes   int64   `json:"bytes"`
	FloorUs float64 `json:"floor_us,omitempty"`
	XHBM    float64 `json:"x_hbm_floor,omitempty"`
}

// devicePrinter prints a one-device run: the header, then a row per mode
// of each case as soon as it is measured and checked.
type devicePrinter struct {
	s     *report.Stream
	args  []string
	iters int
	warm  int
	ranks int
}

func newDevicePrinter(jsonPath string, args []string, stdout, stderr io.Writer) (*devicePrinter, error) {
	s, err := report.Open(jsonPath, stdout, stderr)
	if err != nil {
		return nil, err
	}
	s.SetColumns(
		report.Column{Head: "tokens", Width: 6}, report.Column{Head: "mode", Width: 10, Left: true},
		report.Column{Head: "p50_us", Width: 8}, report.Column{Head: "p99_us", Width: 8},
		report.Column{Head: "rank_us", Width: 7},
		report.Column{Head: "ds_us", Width: 6}, report.Column{Head: "dr_us", Width: 6},
		report.Column{Head: "cs_us", Width: 6}, report.Column{Head: "cr_us", Width: 6},
		report.Column{Head: "floor_us", Width: 8}, report.Column{Head: "x_hbm", Width: 5},
		report.Column{Head: "verified", Left: true})
	return &devicePrinter{s: s, args: args}, nil
}

func (p *devicePrinter) start(r *a2abench.Report) {
	p.iters, p.warm, p.ranks = r.Iters, r.Warmup, r.WorldSize
	verified := "no case is checked (--check=false)"
	if r.CheckIters > 0 {
		verified = fmt.Sprintf("yes = the last timed step's outputs of every rank (expert counts and offsets, received "+
			"rows and scales, combined outputs) equal the oracle's (package a2a/reference), and so do %s of new inputs "+
			"and routing after it", plural(r.CheckIters, "step"))
		if r.Graph {
			verified += fmt.Sprintf(", and %s through the same graph", plural(r.CheckIters, "replay"))
		}
		verified += "\nFAIL = a rank's results differed"
	}
	p.s.Begin(report.Begin{Tool: "bench-a2a", Args: p.args, Verified: verified, Setup: r})
	t := p.s.Table
	t.Note("bench-a2a, every rank on one device")
	t.Field("run", fmt.Sprintf("%d ranks of the %s backend on %s, %s: nvlink %d, dp %d, %s per rank; fabric %s between them",
		r.WorldSize, r.Backend, r.Device, r.Mode, r.NVLink, r.Replicas, plural(r.NICs, "NIC"), r.Provider))
	t.Field("launch", fmt.Sprintf("%d blocks of %d threads per kernel; transport buffers in %s", r.Grid, r.Block, r.Buffers))
	t.Field("shape", fmt.Sprintf("up to %d tokens per rank, hidden %d, %d scales, %d experts, top-%d, %s dispatch, %s combine",
		r.MaxTokens, r.Hidden, r.Scales, r.Experts, r.TopK, r.In, r.Out))
	timing := fmt.Sprintf("%d steps per case after %d warmup, one fixed input (every rank sends the case's tokens, "+
		"routed uniformly); a step is the four kernels of every rank, host clock around their launches and completion; "+
		"p50/p99 of steps; rank_us = p50 over the ranks (a rank's share of the device); ds..cr_us = p50 of "+
		"each phase of every rank (lockstep rows only)", r.Iters, r.Warmup)
	switch r.Mode {
	case a2abench.ModeLockStep:
		timing += "; lockstep: each phase of every rank queued, then waited for, before the next"
	case a2abench.ModeConcurrent:
		timing += "; concurrent: each rank queues its four launches on its own stream, all at once"
	}
	if r.Graph {
		timing += "; graph: the lock step captured once into a CUDA graph, one launch per step"
	}
	t.Field("timing", timing)
	if r.CopyGBps > 0 {
		t.Field("floor", fmt.Sprintf("floor_us = bytes a step of every rank must read and write (dispatch T+3TK token "+
			"rows, combine 3TK+T output rows, per rank) over the device's copy bandwidth, %.0f GB/s read+written "+
			"(1 GiB device-to-device copies, best of 3, measured at start); x_hbm = p50 / floor_us", r.CopyGBps))
	} else {
		t.Field("floor", "GPU only (--backend cuda): the emulator has no device memory bandwidth to compare with; floor_us and x_hbm are -")
	}
	t.Field("verified", verified)
	t.Note("")
	t.Heading()
}

func (p *devicePrinter) addCase(c a2abench.DeviceCase) {
	steps := report.Summarize(report.Micros(c.Steps))
	rec := deviceRecord{Tokens: c.Tokens, Mode: c.Mode, Bytes: c.Bytes, FloorUs: c.FloorUs,
		Measure: report.Measure{Iters: p.iters, Warmup: p.warm, Lat: steps, Checked: c.Checked,
			Verified: c.Checked && c.CheckError == "", Error: c.CheckError}}
	f := func(v float64) string { return report.Fixed(v, 2) }
	f1 := func(v float64) string { return report.Fixed(v, 1) }
	rec.RankUs = steps.P50 / float64(max(p.ranks, 1))
	cells := []string{report.Int(c.Tokens), c.Mode, f(steps.P50), f(steps.P99), f1(rec.RankUs)}
	for _, ph := range c.Phases {
		if len(ph) == 0 {
			cells = append(cells, "-")
			continue
		}
		st := report.Summarize(report.Micros(ph))
		rec.Phases = append(rec.Phases, st)
		cells = append(cells, f1(st.P50))
	}
	if c.FloorUs > 0 && steps.P50 > 0 {
		rec.XHBM = steps.P50 / c.FloorUs
		cells = append(cells, f1(c.FloorUs), report.Fixed(rec.XHBM, 2))
	} else {
		cells = append(cells, "-", "-")
	}
	p.s.Table.Row(append(cells, rec.Verdict())...)
	p.s.Case(rec)
	if c.CheckError != "" {
		p.s.Table.Field("error", c.CheckError)
	}
}

func (p *devicePrinter) finish(runErr error) error {
	p.s.End(runErr)
	return p.s.Close()
}

// runDevice runs every rank of the job in this process on one device.
func runDevice(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	p, err := newDevicePrinter(o.json, append([]string{"bench-a2a"}, os.Args[1:]...), stdout, stderr)
	if err != nil {
		return err
	}
	_, err = a2abench.RunDevice(ctx, o.spec, a2abench.Options{OnStart: p.start, OnDeviceCase: p.addCase})
	if perr := p.finish(err); perr != nil && err == nil {
		err = perr
	}
	return err
}
