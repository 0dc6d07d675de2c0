// Command fabric-debug benchmarks and debugs ferry's TransferEngine. It
// runs the reference tool's workloads and prints them the way perftest and
// nccl-tests do: a header saying what runs and how it is measured, then
// one row per case as soon as the case completes, with fixed units per
// column, so a run cut short keeps every row it finished.
//
// Usage:
//
//	fabric-debug loopback [flags]        server and client engines in one process
//	fabric-debug serve [flags]           print "Main Address: <hex>", serve until interrupted
//	fabric-debug client <hex> [flags]    run the workloads against a server
//	fabric-debug client HOST:PORT --transport 'tcp;ofi_rxm' [flags]
//	                                     the same, by the host:port a tcp serve prints
//	fabric-debug ranks --world-size W (--spawn | --rank R --master HOST:PORT) [flags]
//	fabric-debug info [--json]           transports, devices, capabilities of this machine
//	fabric-debug transports              every transport name and the provider serving it
//	fabric-debug flood-while-register    a flood's throughput while a large region
//	                                     registers on its group (make bench-regflood)
//	                                     (--list-transports is the same)
//	fabric-debug [GPUS NICS_PER_GPU [SERVER_ADDRESS]]   the reference's positional form
//
// The server is the writer: it writes into the client's buffer and times
// each iteration from submit to its last completion. Workloads: paged
// (10000 B x 200 pages, then 1 to 64 KiB pages x 10000 and x 100), single
// (10000 B, then 1 KiB to 64 MiB) and imm (latency of an immediate-only
// write). --sizes and --pages replace the default sizes and page counts;
// --iters 0 picks 100 iterations, fewer for large cases, so the default
// run takes seconds.
//
// fabric-debug and bench-a2a spell their shared options alike: --transport,
// --nics, --poll spin|adaptive, -v (or --verbose) and the transports
// listing. The earlier spellings stay as aliases, named as such in -h:
// --provider (--transport), --nets-per-gpu (--nics), --spin (--poll spin),
// --list-transports (transports). bench-compare passes --provider, which
// the older revisions it builds know.
//
// loopback --target-nics M gives the receiving engine M NICs while the
// writer keeps --nics: unequal groups, whose single writes are sharded over
// the wider side and whose expected immediates come from
// fabric.ExpectedImms (a client may likewise differ from its server).
//
// # Output
//
// Lines starting with '#' are the header (engine, NICs, notes, how the
// timing and the check work) and the summary; the others are rows:
//
//	workload size pages iters p50_us p99_us min_us max_us Gbit/s Mop/s [link_%] verified
//
// Latencies are microseconds, the distribution of one timed iteration;
// Gbit/s and Mop/s are the timed payload and writes over the timed
// iterations' total time. "verified" is yes when the case was checked and
// right: after its timed iterations the writer runs the case once more
// with an immediate on every write, and the target, whose buffer was
// poisoned before the case, waits for exactly those immediates and
// compares every byte with the seeded pattern (the imm case counts every
// immediate of every iteration). no means not checked (--verify=false, or
// the null provider, which moves no bytes); FAIL means wrong, or the case
// failed, with the error on the next line.
//
// --json FILE writes one JSON object per line as the run goes: a "begin"
// record (the command line, what verified means, the header), a "case"
// record per row (latency statistics in microseconds: n, mean, sd, min,
// p50, p99, max), and an "end" record with the counts; "-" writes them to
// standard output and the table to standard error. bench-a2a writes the
// same record family. --plot FILE.png draws bandwidth against message
// size at the end.
//
// # Transports
//
// Every subcommand uses --transport auto unless told otherwise: EFA, then
// verbs, never a silent fallback; where neither exists it refuses and
// says what to pass. The header names the transport and why it was
// chosen. On a machine without RDMA NICs, pass --transport shm or ipc (one
// host) or 'tcp;ofi_rxm' (binds to 127.0.0.1 unless --node says otherwise).
// --transport null runs the workloads through the engine over a domain
// that completes every write at once: the engine's own cost, for example
//
//	fabric-debug loopback --transport null --workloads paged --sizes 64 --pages 10000
//
// prints the paged 64 B rate. --raw posts the same workloads straight on
// libfabric from one C loop (efa.RawBench), the provider's ceiling, in the
// same table: the same page offsets in buffers of the same --buffer-mib,
// so the ceiling pays the cache and TLB misses the engine's case pays.
//
// GPU memory: --gpus 0,1 (or the positional GPUS, or --host-memory=false
// for GPU 0) gives each engine a group per GPU and registers its buffers
// in the first GPU's memory through package fabric/gpu: a dma-buf of the
// range when the kernel (>= 5.12), the driver and the NIC stack allow it,
// else the device address (the provider's own CUDA support). The groups
// take each GPU's nearest NICs (--gpu-placement topology), or the
// transport's first --nics NICs (--gpu-placement first, for machines whose
// PCI topology is hidden). Verified cases copy their pattern in and the
// result out through the host. Without a CUDA driver these fail with an
// error naming the library that could not be loaded. info asks the driver
// whether each GPU exports dma-bufs.
//
// --transport ipc is ferry's own shared-memory transport between processes
// of one host (package ipc): the writer copies straight into the target's
// pages, so
//
//	fabric-debug loopback --transport ipc --workloads single --sizes 64M
//
// measures what one write can move through memory here.
//
// --workloads read runs the single workload turned around: the server (in
// loopback, the engine that otherwise writes) pulls each size from the
// client's buffer with RDMA READ (fabric.Engine.SubmitRead); with --verify
// the client fills its range with the seeded pattern and the reader
// compares every byte it read. Reads run in loopback and client/server
// mode, on transports that do RDMA READ (mem, ipc, the libfabric ones);
//
//	fabric-debug loopback --transport ipc --workloads read,single --sizes 64M
//
// compares a read with a write of the same size in one run. A read and a
// single write of one size run as a pair, in alternating rounds (a few
// iterations of one, then of the other, which goes first alternating
// too), so the two rows are measured on the same machine at the same time
// rather than a second apart; without --iters a pair runs at least 16
// iterations of each, one per round for large sizes. The first round
// carries the warmup and the last one the check, so both rows are
// verified as when run alone.
//
// --metrics HOST:PORT serves the counters of every engine the command
// opens for Prometheus (package fabric/fabricmetrics, labelled
// engine="server", "client" or "rank") at http://HOST:PORT/metrics, for
// example beside a long-running serve; port 0 picks a free one, printed on
// standard error. Ranks add their local rank to the port.
//
// Servers and clients can meet through an etcd directory (package
// fabric/directory) instead of a copied address:
//
//	fabric-debug serve --transport shm --directory etcd://127.0.0.1:2379/lab --name p0 --labels role=prefill
//	fabric-debug client --transport shm --directory etcd://127.0.0.1:2379/lab --select role=prefill
//
// serve publishes its engine under a lease and removes the entry when it
// stops (a killed serve's entry expires within the lease's 10 s); client
// runs against the first engine, by name, the selector matches.
//
// Ranks without --spawn take their rank, world size and master from the
// launcher's environment (torchrun, Open MPI, Slurm, or FERRY_RANK,
// FERRY_WORLD_SIZE, FERRY_MASTER) or from --rank, --world-size and
// --master; every rank needs the same FERRY_JOB_TOKEN (--spawn makes one).
// Rank r writes into rank r+1 and checks what rank r-1 wrote into it; rank
// 0 prints every pair's row of each case.
//
// The exit status is 0 when every case ran and every checked case
// verified, 1 when a case failed or did not verify, 2 for bad usage.
package main
