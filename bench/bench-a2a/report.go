package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/ferryrdma/ferry/bench/internal/a2abench"
	"github.com/ferryrdma/ferry/bench/internal/report"
)

// caseRecord is one row: a phase of one case. Its latency statistics are
// of both halves back to back; the halves have their own.
type caseRecord struct {
	Tokens int    `json:"tokens"`
	Phase  string `json:"phase"`
	report.Measure
	Send report.Stats `json:"send_us"`
	Recv report.Stats `json:"recv_us"`
	// NominalBytes is the phase's nominal bytes per rank; GBps is them
	// over the p50 of both halves, in GB/s (the reference's figure).
	NominalBytes int64   `json:"nominal_bytes"`
	GBps         float64 `json:"gbyte_s"`
	// Wire is, per rank, what the phase's fabric writes carried per
	// iteration and their ratio to the nominal bytes of the rows they
	// carried (absent when the backend does not count them).
	Wire []wireRecord `json:"wire,omitempty"`
	// Floor is the memcpy of the phase's nominal bytes on every rank at
	// once, XFloor the phase's p50 over its p50 (--peers).
	Floor  *report.Stats `json:"floor_us,omitempty"`
	XFloor float64       `json:"x_floor,omitempty"`
	// MPI is Open MPI's MPI_Alltoallv of the same per-pair bytes, every
	// process's samples, XMPI the phase's p50 over its p50; MPIError says
	// why it did not run (--peers with the host backend).
	MPI      *report.Stats `json:"mpi_us,omitempty"`
	XMPI     float64       `json:"x_mpi,omitempty"`
	MPIError string        `json:"mpi_error,omitempty"`
}

// wireRecord is one rank's fabric writes of one phase per iteration.
type wireRecord struct {
	Rank int `json:"rank"`
	a2abench.PhaseWire
}

// printer prints the run as it goes: the header before the first case,
// two rows per case (dispatch, combine) as soon as every rank has shared
// the case, JSON records beside them.
type printer struct {
	s     *report.Stream
	args  []string
	iters int
	warm  int
	world int
	topk  int
	// mpi, when set, times MPI_Alltoallv beside each case (host backend,
	// --peers); ctx bounds its runs.
	mpi *mpiPeer
	ctx context.Context
}

func newPrinter(jsonPath string, args []string, stdout, stderr io.Writer) (*printer, error) {
	s, err := report.Open(jsonPath, stdout, stderr)
	if err != nil {
		return nil, err
	}
	s.SetColumns(
		report.Column{Head: "tokens", Width: 6}, report.Column{Head: "phase", Width: 8, Left: true},
		report.Column{Head: "p50_us", Width: 9}, report.Column{Head: "p99_us", Width: 9},
		report.Column{Head: "min_us", Width: 9}, report.Column{Head: "max_us", Width: 9},
		report.Column{Head: "send_p50_us", Width: 11}, report.Column{Head: "recv_p50_us", Width: 11},
		report.Column{Head: "GB/s", Width: 8},
		report.Column{Head: "floor_us", Width: 9}, report.Column{Head: "x_floor", Width: 7},
		report.Column{Head: "mpi_us", Width: 9}, report.Column{Head: "x_mpi", Width: 6},
		report.Column{Head: "verified", Left: true})
	return &printer{s: s, args: args}, nil
}

// verifiedMeans says what the verified column means for this run.
func verifiedMeans(r *a2abench.Report) string {
	if r.CheckIters == 0 {
		return "no case is checked (--check=false)"
	}
	return fmt.Sprintf("yes = after the timed iterations every rank ran %s of the case "+
		"(its token count, new inputs and routing) and compared what it received, the expert counts "+
		"and offsets and the combined outputs, with the oracle (package a2a/reference)\n"+
		"FAIL = a rank's results differed, or the case failed", plural(r.CheckIters, "iteration"))
}

// plural says "1 NIC", "2 NICs".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func (p *printer) start(r *a2abench.Report) {
	p.iters, p.warm, p.world, p.topk = r.Iters, r.Warmup, r.WorldSize, r.TopK
	verified := verifiedMeans(r)
	p.s.Begin(report.Begin{Tool: "bench-a2a", Args: p.args, Verified: verified, Setup: r})
	t := p.s.Table
	t.Note("bench-a2a")
	reason := ""
	if r.Reason != "" {
		reason = " (" + r.Reason + ")"
	}
	t.Field("run", fmt.Sprintf("%s backend over %s%s, %d ranks: nvlink %d, dp %d, %s per rank",
		r.Backend, r.Provider, reason, r.WorldSize, r.NVLink, r.Replicas, plural(r.NICs, "NIC")))
	t.Field("shape", fmt.Sprintf("up to %d tokens per rank, hidden %d, %d scales, %d experts, top-%d, %s dispatch, %s combine",
		r.MaxTokens, r.Hidden, r.Scales, r.Experts, r.TopK, r.In, r.Out))
	t.Field("timing", fmt.Sprintf("%d iterations per case after %d warmup, a new routing each, a barrier "+
		"before each phase; statistics over every rank's samples; p50..max are both halves back to back; "+
		"GB/s = nominal bytes per rank (dispatch T*K*(token+scales), combine T*K*row) over the p50; "+
		"wire = bytes per iteration the rank's fabric writes carried (counted where posted; node-domain copies "+
		"are not on the wire, nor, with --backend host over ipc, rows stored into the peer's buffer through the "+
		"mapping ipc lends) and their ratio to the nominal bytes of the rows they carried; "+
		"floor_us = p50 of a memcpy of the phase's nominal bytes per rank, every rank at once, from memory (64 MiB cycled); "+
		"mpi_us = p50 of Open MPI's MPI_Alltoallv moving the case's per-pair bytes (mean rows per iteration) "+
		"on as many local processes, every process's samples (host backend; --mpi-order step: a dispatch and a combine "+
		"call per iteration, each on its own buffers, as a step runs; phase: each phase's calls back to back); x_ = p50 over them",
		r.Iters, r.Warmup))
	t.Field("verified", verified)
	t.Note("")
	t.Heading()
}

func (p *printer) addCase(c a2abench.Case) {
	mpi, mpiErr := p.runMPI(c)
	for _, phase := range []string{a2abench.Dispatch, a2abench.Combine} {
		send, recv := c.Halves(phase)
		su, ru := report.Micros(send), report.Micros(recv)
		both := make([]float64, len(su))
		for i := range su {
			both[i] = su[i] + ru[i]
		}
		rec := caseRecord{Tokens: c.Tokens, Phase: phase,
			Measure: report.Measure{Iters: p.iters, Warmup: p.warm, Lat: report.Summarize(both),
				Checked: c.Checked, Verified: c.Checked && c.CheckError == "", Error: c.CheckError},
			Send: report.Summarize(su), Recv: report.Summarize(ru), NominalBytes: c.NominalBytes(phase)}
		for _, w := range c.Wire {
			rec.Wire = append(rec.Wire, wireRecord{Rank: w.Rank, PhaseWire: w.Phase(phase)})
		}
		if rec.Lat.P50 > 0 {
			rec.GBps = float64(rec.NominalBytes) / (rec.Lat.P50 * 1e3) // bytes per ns = GB/s
		}
		f := func(v float64) string { return report.Fixed(v, 2) }
		floorCell, xFloorCell, mpiCell, xMPICell := "-", "-", "-", "-"
		if fl := c.Floor(phase); len(fl) > 0 {
			st := report.Summarize(report.Micros(fl))
			rec.Floor = &st
			if st.P50 > 0 {
				rec.XFloor = rec.Lat.P50 / st.P50
			}
			floorCell, xFloorCell = f(st.P50), report.Fixed(rec.XFloor, 2)
		}
		if mpiErr != nil {
			rec.MPIError = mpiErr.Error()
			mpiCell, xMPICell = "n/a", "n/a"
		} else if m := mpi[phase]; len(m) > 0 {
			st := report.Summarize(m)
			rec.MPI = &st
			if st.P50 > 0 {
				rec.XMPI = rec.Lat.P50 / st.P50
			}
			mpiCell, xMPICell = f(st.P50), report.Fixed(rec.XMPI, 2)
		}
		p.s.Table.Row(report.Int(c.Tokens), phase, f(rec.Lat.P50), f(rec.Lat.P99), f(rec.Lat.Min), f(rec.Lat.Max),
			f(rec.Send.P50), f(rec.Recv.P50), report.Fixed(rec.GBps, 3), floorCell, xFloorCell, mpiCell, xMPICell,
			rec.Verdict())
		p.s.Case(rec)
	}
	if len(c.Wire) > 0 {
		p.s.Table.Field("wire", wireLine(c.Wire))
	}
	if mpiErr != nil {
		p.s.Table.Field("mpi", "not run: "+mpiErr.Error())
	}
	if c.CheckError != "" {
		p.s.Table.Field("error", c.CheckError)
	}
}

// finish prints the summary and closes the output; runErr is the run's
// error. It returns an error only when the output itself failed.
func (p *printer) finish(runErr error) error {
	p.s.End(runErr)
	return p.s.Close()
}

// wireLine says, per rank, the bytes each phase's fabric writes carried
// per iteration and their ratio to the nominal bytes of those rows.
func wireLine(ws []a2abench.RankWire) string {
	var b strings.Builder
	for i, w := range ws {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "rank %d dispatch %d B (%.3fx nominal), combine %d B (%.3fx)", w.Rank,
			w.Dispatch.Bytes, w.Dispatch.Ratio, w.Combine.Bytes, w.Combine.Ratio)
	}
	return b.String()
}

// runMPI times MPI_Alltoallv on case c's per-pair bytes: dispatch sends
// Pairs[r][q] rows of token and scales r to q, combine the same rows of
// the combine row back, q to r. It returns each phase's samples, or why
// it could not run (nil, nil: no peer was asked for).
func (p *printer) runMPI(c a2abench.Case) (map[string][]float64, error) {
	if p.mpi == nil {
		return nil, nil
	}
	W := p.world
	copies := int64(c.Tokens) * int64(p.topk)
	if len(c.Pairs) != W || copies == 0 {
		return nil, fmt.Errorf("the case has no per-pair counts of %d ranks", W)
	}
	drow, crow := uint64(c.DispatchBytes/copies), uint64(c.CombineBytes/copies)
	disp, comb := make([]uint64, W*W), make([]uint64, W*W)
	for r, row := range c.Pairs {
		if len(row) != W {
			return nil, fmt.Errorf("rank %d shared %d per-pair counts, want %d", r, len(row), W)
		}
		for q, n := range row {
			disp[r*W+q] = n * drow
			comb[q*W+r] = n * crow
		}
	}
	d, cb, err := p.mpi.run(p.ctx, W, p.iters, p.warm, disp, comb)
	if err != nil {
		return nil, err
	}
	return map[string][]float64{a2abench.Dispatch: d, a2abench.Combine: cb}, nil
}
