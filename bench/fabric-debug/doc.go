// Command fabric-debug benchmarks and debugs ferry's TransferEngine. It
// keeps the output shape of the reference tool, so figures compare line by
// line, and adds host-memory runs, explicit providers and machine-readable
// output.
//
// Usage:
//
//	fabric-debug loopback [flags]        server and client engines in one process
//	fabric-debug serve [flags]           print "Main Address: <hex>", serve until interrupted
//	fabric-debug client <hex> [flags]    run the workloads against a server
//	fabric-debug ranks --world-size W (--spawn | --rank R --master HOST:PORT) [flags]
//	fabric-debug info [--json]           transports, devices, capabilities of this machine
//	fabric-debug [GPUS NICS_PER_GPU [SERVER_ADDRESS]]   the reference's positional form
//
// The server is the writer: it writes into the client's buffer and times
// each iteration from submit to its last completion. Workloads: paged
// (1 to 64 KiB pages, 10000 and 100 pages, plus 10000 B x 200 verified),
// single (1 KiB to 64 MiB, plus 10000 B verified) and imm (latency of an
// immediate-only write, every immediate counted at the client). --sizes and
// --pages replace the default sizes and page counts; --iters 0 picks 100
// iterations, fewer for large cases, so the default run takes seconds.
//
// --provider null runs the workloads through the engine over a domain
// that completes every write at once: the engine's own cost, for example
//
//	fabric-debug loopback --provider null --workloads paged --sizes 64 --pages 10000
//
// prints the paged 64 B rate in Mops. --raw posts the same workloads
// straight on libfabric from one C loop (efa.RawBench), the provider's
// ceiling, in the same table.
//
// The default provider is shm for loopback and ranks, and auto (EFA, then
// verbs, never a silent fallback) for serve and client; tcp needs
// --provider 'tcp;ofi_rxm' and binds to 127.0.0.1 by default. GPU memory
// (--gpus, or GPUS other than "host") needs the cuda package and is refused
// with a clear error. --json FILE writes the results as JSON (- for stdout),
// --plot FILE.png draws bandwidth against message size.
//
// Ranks without --spawn take their rank, world size and master from the
// launcher's environment (torchrun, Open MPI, Slurm, or FERRY_RANK,
// FERRY_WORLD_SIZE, FERRY_MASTER) or from --rank, --world-size and
// --master; every rank needs the same FERRY_JOB_TOKEN (--spawn makes one).
// Rank r writes into rank r+1 and checks what rank r-1 wrote into it; rank
// 0 prints a section per pair.
//
// The exit status is 0 when every case ran and every verified case
// checked out, 1 when a case failed or did not verify, 2 for bad usage.
package main
