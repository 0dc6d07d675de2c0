package bench_test

import (
	"os"

	"github.com/ferryrdma/ferry/a2a/bench"
)

// A report as rank 0 prints it (the numbers here are made up; Run fills
// them from every rank's samples).
func ExampleReport_WriteTable() {
	st := func(p50 float64) bench.Stats {
		return bench.Stats{Mean: p50 * 1.1, Std: p50 / 10, Min: p50 / 2, P50: p50, P99: p50 * 2, Max: p50 * 3}
	}
	rep := &bench.Report{WorldSize: 4, NVLink: 1, Replicas: 1, NICs: 1, Tokens: 128, Hidden: 7168, Scales: 56,
		Experts: 256, TopK: 8, In: "fp8", Out: "bf16", Backend: "host", Provider: "shm", Iters: 100, Warmup: 10,
		Checked: true, Samples: 400,
		Dispatch: bench.Phase{Both: st(300), Send: st(100), Recv: st(200), NominalBytes: 7569408, BandwidthGBps: 25.23},
		Combine:  bench.Phase{Both: st(500), Send: st(150), Recv: st(350), NominalBytes: 14680064, BandwidthGBps: 29.36},
	}
	_ = rep.WriteTable(os.Stdout)
	// Output:
	// a2a host backend over shm: 4 ranks (nvlink 1, dp 1, 1 NIC(s) per rank)
	// tokens 128, hidden 7168, scales 56, experts 256, top-8, fp8 dispatch, bf16 combine
	// 100 iterations after 10 warmup, 400 samples from all ranks, checked against the oracle first
	//
	// phase     half      p50 µs     p99 µs    mean µs      ± sd     min µs     max µs     GB/s
	// dispatch  both       300.0      600.0      330.0      30.0      150.0      900.0   25.230
	// dispatch  send       100.0      200.0      110.0      10.0       50.0      300.0
	// dispatch  recv       200.0      400.0      220.0      20.0      100.0      600.0
	// combine   both       500.0     1000.0      550.0      50.0      250.0     1500.0   29.360
	// combine   send       150.0      300.0      165.0      15.0       75.0      450.0
	// combine   recv       350.0      700.0      385.0      35.0      175.0     1050.0
	//
	// nominal bytes per rank: dispatch 7569408 (T*K*(token+scales)), combine 14680064 (T*K*combine row); GB/s = nominal / p50 of both
}
