// Command bench-a2a measures MoE dispatch and combine (package a2a) across
// a world of ranks, the way the reference's all-to-all benchmark does:
// time warmup plus measured iterations, each with a new random routing,
// every phase split into its send and receive halves, and report the
// distribution of every rank's samples together with the bandwidth of the
// nominal bytes; then check the case against the oracle.
//
// Usage:
//
//	bench-a2a --world-size W --spawn [shape and run flags]
//	bench-a2a --world-size W --rank R --master HOST:PORT [flags]   (one rank; FERRY_JOB_TOKEN set)
//	torchrun / mpirun / srun ... bench-a2a [flags]                  (ranks from the launcher's environment)
//	bench-a2a --directory etcd://HOST:PORT/PREFIX --world-size W [--name N] [flags]  (W of these; FERRY_JOB_TOKEN set)
//	bench-a2a transports                                           (every transport name and its provider)
//
// --spawn starts W local processes of this program (rendezvous.SpawnLocal)
// and waits for them; without it, this process is one rank and finds the
// others through the rendezvous store of rank 0 (package
// fabric/rendezvous reads torchrun, Open MPI, Slurm and FERRY_*
// variables; --rank, --world-size, --local-rank and --master override
// them). With --directory, ranks started anywhere, in any order, meet in
// an etcd directory instead (package fabric/directory): each publishes
// its engine labelled role=bench-a2a with its rendezvous listener
// (--listen), waits for --world-size of them, and takes its rank from the
// order of their names (--name; the first serves the store).
//
// The shape flags mirror the reference benchmark, with its decode shape as
// the defaults: --tokens 128 --hidden 7168 --scales 56 --experts 256
// --topk 8 --in-dtype fp8 --out-dtype bf16, --nvlink S ranks per shared
// memory domain (1: every rank pair crosses the fabric), --dp D replicas,
// --nics N NICs per rank, --private M copies per private window
// (0: the default size, -1: none), --pad expert padding.
//
// --backend host runs the host-memory backend (package a2a/host): Go
// loops over registered host buffers, the fabric engine between domains.
// --backend cuda runs the CUDA backend (package a2a/cudabackend) on this rank's
// GPU (picked by its local rank), with kernels NVRTC compiles for it; the
// fabric must carry GPU memory (efa or verbs) unless every rank is in one
// NVLink domain (--nvlink W: the fabric then carries only the count rows
// and signals, in host memory). Ranks of one NVLink domain share their
// buffers as CUDA VMM allocations exported to each other over unix
// sockets (a2a/cudabackend.ProcessNode).
// --backend cuda-emu runs the same backend with its kernels on the CPU
// emulator (a2a/cudabackend/emulated): the same .cu sources built by g++, "device
// memory" being host memory, any provider; its timings are the
// emulator's, useful to compare with each other, not with a GPU.
// --grid and --block size the CUDA backends' launches; --poll spin makes
// their CPU workers poll the kernels' flags without sleeping (a core per
// rank; the default on a GPU), --poll adaptive lets the emulator's back off
// (its default). --transport picks the fabric transport: "shm" (the default with
// --spawn: every rank is on this machine), "tcp;ofi_rxm", "efa", "verbs",
// or "auto" (the default otherwise: EFA, then verbs, never a silent TCP
// fallback). --node pins libfabric to an address (127.0.0.1 with --spawn).
// -v (or --verbose) logs the engine's lifecycle too.
//
// fabric-debug spells these options the same way. The earlier spellings
// stay as aliases, named as such in -h: --provider (--transport),
// --nets-per-gpu (--nics), --spin (--poll spin), --verbose (-v),
// --list-transports (the transports subcommand).
//
// --mode lockstep|concurrent runs every rank in this process on one
// device (no --spawn, no job): the GPU of ordinal 0 with --backend cuda,
// the emulator with --backend cuda-emu, the ranks' engines over the
// in-process "mem" fabric (package a2a/cudabackend/onedevice). lockstep
// queues each phase of every rank and waits for it before the next, with
// full grids; concurrent gives each rank its own stream and a grid of
// SMs/W blocks (unless --grid) so all ranks' kernels are resident at once,
// with --timeout as the watchdog on every wait (a hung step ends with an
// error naming the rank, phase and what it awaited). Each case times
// --iters steps of one fixed input; --graph (a GPU only; implies
// lockstep) also times replays of the lock step captured once into a CUDA
// graph. On a GPU the device's copy bandwidth is measured first and each
// row shows the step's floor (the bytes every rank's step must read and
// write, over that bandwidth) and the ratio of the p50 to it. The table:
//
//	tokens mode p50_us p99_us ds_us dr_us cs_us cr_us floor_us x_hbm verified
//
// (ds..cr: each phase of every rank, lock step only; floor and x_hbm: a
// GPU only). With ranks in more than one NVLink domain on a GPU, the
// transport buffers live in host memory mapped into the device, since the
// in-process fabric copies by host address; the header says so.
//
// --tokens takes a comma list: one case per token count (tokens per rank
// and iteration), the buffers sized for the largest, so a sweep such as
// --tokens 1,8,32,128 runs in one job. After each case's timed iterations,
// --check (on by default) runs --check-iters iterations of it (default 1)
// on every rank with new inputs and routing and compares them with the
// oracle (package a2a/reference); --check=false leaves the cases
// unchecked. --iters and --warmup count timed and untimed iterations per
// case, --timeout bounds each phase of each iteration, --seed fixes the
// inputs.
//
// Rank 0 prints the way fabric-debug does: '#' header lines (the run, the
// shape, how the timing and the check work), then two rows per case as
// soon as every rank has shared it:
//
//	tokens phase p50_us p99_us min_us max_us send_p50_us recv_p50_us GB/s floor_us x_floor mpi_us x_mpi verified
//
// The latencies are microseconds over every rank's samples, both halves
// back to back; GB/s is the nominal bytes per rank (dispatch
// T*K*(token+scale bytes), combine T*K*combine row bytes) over the p50,
// the reference benchmark's figure. With --peers (the default) each case
// is followed by a memcpy of each phase's nominal bytes on every rank at
// once, cycling through 64 MiB so the bytes come from memory and not the
// cache, as the phases' own do (floor_us, its p50; x_floor the phase's p50
// over it) and, with the
// host backend, Open MPI's MPI_Alltoallv moving the case's per-pair bytes
// (the mean rows per iteration each rank sent each rank, times the row
// bytes, back the other way in combine) on as many local processes
// (mpi_us, x_mpi): a C program the bench builds with mpicc and runs with
// mpirun --allow-run-as-root --oversubscribe -np W (make deps installs
// openmpi-bin and libopenmpi-dev; without them the row says n/a and a
// "# mpi:" line says why). A "# wire:" line after each case gives, per
// rank, the bytes its fabric writes carried per iteration in each phase,
// counted where they were posted, and their ratio to the nominal bytes of
// the rows they carried. --json FILE writes one JSON record per
// line as the run goes, the record family fabric-debug writes ("begin",
// a "case" per row with lat_us, send_us and recv_us statistics, wire
// (per rank: bytes, rows, nominal_bytes, ratio), floor_us, x_floor,
// mpi_us, x_mpi or mpi_error; "end");
// "-" writes them to standard output and the table to standard error.
//
// --metrics HOST:PORT serves each rank's engine counters for Prometheus
// (package fabric/fabricmetrics, labelled rank="R") at
// http://HOST:PORT+LOCAL_RANK/metrics while the rank runs; port 0 picks a
// free one. Each rank prints its address on standard error.
//
// --model prints, instead of running, a critical-path MODEL of one step of
// the shape the other flags give (bench-a2a --model --world-size 8
// --nvlink 8 for an EP8 decode step): per phase, the launches, grid
// barriers, bytes per link over published link figures (NVLink, HBM, NIC),
// the CPU control path and PCIe flag hops (stated assumptions), and the
// totals beside pplx-garden's published EP8 figures: a prediction for the
// first GPU run to confirm or refute, labelled as such.
//
// Exit status: 0 on success, 1 when the run fails (a check mismatch
// included), 2 for a bad command line.
package main
