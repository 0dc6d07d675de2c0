package main

import (
	"fmt"
	"io"

	"github.com/ferryrdma/ferry/a2a"
)

// The figures the model (--model) takes from outside the code: published
// link and device numbers of an H100 SXM node, and costs this project has
// not measured on a GPU yet (marked "assumed"). Everything else comes from
// the code's own layout (a2a.Layout) and the kernels' structure.
const (
	nvlinkGBps    = 450.0  // NVLink 4, per direction per GPU (18 links x 25 GB/s)
	hbmGBps       = 3350.0 // HBM3, H100 SXM
	nicGBps       = 50.0   // one 400 Gb/s NIC (ConnectX-7, EFA v2 per GPU on p5)
	launchUs      = 4.0    // a cooperative launch on a stream (assumed; graphs less)
	gridBarrierUs = 1.5    // one grid barrier of one block per SM (assumed)
	pcieHopUs     = 1.0    // a kernel's flag store reaching the CPU, or the CPU's reaching a polling kernel (assumed)
	cpuHopUs      = 3.0    // one fabric message between the ranks' CPU workers, spinning (assumed)
	planUs        = 5.0    // PlanRecv and the plan's write (assumed; BenchmarkPlannerDecodeW64 bounds it from above)
	flushUs       = 2.0    // cuFlushGPUDirectRDMAWrites, below sm_90 and on C2C (assumed)
	pplxDispatch  = 50.0   // pplx-garden's published EP8 decode dispatch, us
	pplxCombine   = 64.0   // and combine
)

// printModel writes the critical-path model of one step (dispatch and
// combine) of cfg's shape at tokens tokens per rank, uniform routing. It
// is a model, not a measurement: a prediction for the first GPU run to
// confirm or refute.
func printModel(w io.Writer, cfg a2a.Config, tokens int) error {
	cfg.MaxTokens = max(cfg.MaxTokens, tokens)
	l, err := cfg.Layout()
	if err != nil {
		return err
	}
	W, S, K, T := float64(cfg.WorldSize), float64(l.NVLinkSize), float64(cfg.ExpertsPerToken), float64(tokens)
	copies := T * K
	node, remote := copies*(S-1)/W, copies*(W-S)/W
	dRow := float64(l.TokenBytes + 4*cfg.Scales) // what a node copy moves
	us := func(bytes, gbps float64) float64 { return bytes / (gbps * 1e3) }
	// Bytes out of one rank per link, per phase.
	dNV, cNV := node*dRow, node*float64(l.CombineBytes)
	dNet, cNet := remote*float64(l.Stride()), remote*float64(l.CombineRow) // as the wire sends them today
	nics := float64(max(l.NICsPerGPU, 1))
	type term struct {
		name string
		us   float64
	}
	ctl := 2*pcieHopUs + cpuHopUs + planUs // ROUTE_DONE -> worker -> count rows -> plan -> PLAN_READY
	dData := max(us(dNV, nvlinkGBps), us(dNet, nicGBps*nics))
	dispatch := []term{
		{"launch dispatch-send", launchUs},
		{"grid barriers dispatch-send (3)", 3 * gridBarrierUs},
		{fmt.Sprintf("max(rows out: %.2f MB NVLink, %.2f MB RDMA; control path %.1f us)", dNV/1e6, dNet/1e6, ctl), max(dData, ctl)},
		{"launch dispatch-recv", launchUs},
		{"grid barriers dispatch-recv (2)", 2 * gridBarrierUs},
		{"copy received rows out (HBM read+write)", us(2*copies*dRow, hbmGBps)},
	}
	if cfg.WorldSize > l.NVLinkSize {
		dispatch = append(dispatch, term{"RDMA flag: engine count -> flush (sm<90, C2C) -> PCIe", flushUs + pcieHopUs})
	}
	combine := []term{
		{"launch combine-send", launchUs},
		{"dispatch barrier (worker, fabric) and flag", cpuHopUs + 2*pcieHopUs},
		{fmt.Sprintf("rows out: %.2f MB NVLink, %.2f MB RDMA", cNV/1e6, cNet/1e6), max(us(cNV, nvlinkGBps), us(cNet, nicGBps*nics))},
		{"grid barrier combine-send (1)", gridBarrierUs},
		{"launch combine-recv", launchUs},
		{"reduce K rows per token (HBM read)", us(copies*float64(l.CombineBytes), hbmGBps)},
		{"grid barrier combine-recv (1)", gridBarrierUs},
	}
	fmt.Fprintf(w, "# MODEL, not a measurement: critical path of one step, W=%d S=%d tokens=%d hidden=%d %s+%d scales -> %s, top-%d\n",
		cfg.WorldSize, l.NVLinkSize, tokens, cfg.Hidden, cfg.DispatchType, cfg.Scales, cfg.CombineType, cfg.ExpertsPerToken)
	fmt.Fprintf(w, "# links (published): NVLink %.0f GB/s per direction, HBM %.0f GB/s, NIC %.0f GB/s x %d; assumed: launch %.1f us, grid barrier %.1f us, PCIe flag hop %.1f us, CPU fabric hop %.1f us, plan %.1f us\n",
		nvlinkGBps, hbmGBps, nicGBps, int(nics), launchUs, gridBarrierUs, pcieHopUs, cpuHopUs, planUs)
	for _, ph := range []struct {
		name  string
		terms []term
		pplx  float64
	}{{"dispatch", dispatch, pplxDispatch}, {"combine", combine, pplxCombine}} {
		total := 0.0
		for _, t := range ph.terms {
			fmt.Fprintf(w, "model %-8s %8.1f us  %s\n", ph.name, t.us, t.name)
			total += t.us
		}
		ref := "no published reference for this shape"
		if cfg.WorldSize == 8 {
			ref = fmt.Sprintf("pplx-garden EP8 decode, published: %.0f us", ph.pplx)
		}
		fmt.Fprintf(w, "model %-8s %8.1f us  TOTAL (%s)\n", ph.name, total, ref)
	}
	return nil
}
