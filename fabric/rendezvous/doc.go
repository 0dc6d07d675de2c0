// Package rendezvous bootstraps N cooperating processes (ranks): it finds
// each process's rank, the world size and the master address, connects
// every rank to a small store hosted by rank 0, and offers the three
// collectives a job needs to exchange NIC addresses and descriptors before
// RDMA can start: AllGather, Broadcast and Barrier.
//
// # Configuration
//
// [ConfigFromEnv] reads the launchers' environment: torchrun (RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), Open MPI
// (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK), Slurm (SLURM_PROCID,
// SLURM_NTASKS, SLURM_LOCALID), and ferry's own FERRY_RANK,
// FERRY_WORLD_SIZE, FERRY_LOCAL_RANK and FERRY_MASTER, which override the
// others field by field. [Config.BindFlags] lets command-line flags override
// all of them. [SpawnLocal] starts W local ranks of a program with the
// FERRY_ variables set, for single-machine runs.
//
// # Security and limits
//
// Every joiner presents the job token (FERRY_JOB_TOKEN, or one SpawnLocal
// generates); rank 0 refuses a wrong token, a rank outside the world, a
// second claim on a rank, and a joiner with another world size, each with a
// clear error to that joiner. Messages are framed with a magic number, a
// version and a length checked against [Config].MaxMessage before anything
// is allocated. By default the master address must be a loopback address:
// a job spanning machines sets [Config].AllowRemote (FERRY_ALLOW_REMOTE=1)
// on purpose.
//
// # Deadlines
//
// Every operation takes a context and ends when its deadline passes. When a
// rank never arrives, the ranks that did get an error naming the missing
// ones (errors.Is(err, ErrTimeout), and [Error].Missing lists them): each
// rank tells rank 0 its deadline, and rank 0 reports the ranks it is still
// waiting for shortly before that deadline (a fifth of the time left, at
// most 500 ms, before it). A call may overrun its deadline by at most
// 200 ms waiting for a late report.
//
// # Concurrency and lifetime
//
// A [Group] is safe for concurrent use, but collectives are matched by
// order across ranks, so each rank must issue the same sequence of
// collectives; calls from several goroutines of one rank are serialised.
// After a collective fails the group is broken and every later call returns
// the same error. Close is not collective: call Barrier first when other
// ranks may still be reading from rank 0. Close is idempotent and returns
// only when every goroutine the group started has ended.
package rendezvous
