package rendezvous

import (
	"flag"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"
)

// DefaultMaster is the store address when no launcher names one.
const DefaultMaster = "127.0.0.1:29510"

// DefaultMaxMessage bounds one rank's contribution to a collective.
const DefaultMaxMessage = 16 << 20

// Config says who this process is in the job and where rank 0 listens. It
// is plain data (apart from Listener, which Join takes over);
// ConfigFromEnv and BindFlags fill it in.
type Config struct {
	Rank      int
	WorldSize int
	LocalRank int
	// Master is rank 0's store address, host:port. Rank 0 listens there
	// (on that address only, never on every interface).
	Master string
	// Token authenticates joiners; every rank of a job must present the
	// same one. Required when WorldSize > 1.
	Token string
	// Source names where Rank and WorldSize came from: "default", "slurm",
	// "openmpi", "torchrun", "ferry" or "flags".
	Source string
	// AllowRemote permits a Master that is not a loopback address.
	AllowRemote bool
	// MaxMessage bounds one rank's contribution in bytes; 0 means
	// DefaultMaxMessage. Every rank must use the same value.
	MaxMessage int
	// Listener, for rank 0, is an already-listening socket to serve on
	// instead of listening on Master; Join takes ownership of it.
	Listener net.Listener
	// ListenFD, for rank 0, is an inherited listening socket's descriptor
	// (FERRY_LISTEN_FD, set by SpawnLocal); 0 means none.
	ListenFD int
	// JoinTimeout bounds Join when its context has no earlier deadline; 0
	// means DefaultJoinTimeout. Flag -join-timeout, environment
	// FERRY_JOIN_TIMEOUT (a Go duration such as "30s").
	JoinTimeout time.Duration
	// Progress, when set, is told every few seconds while Join waits:
	// rank 0 names the ranks not joined yet, the others the store they
	// are waiting for. Tools print it so a stuck launch says what it is
	// waiting for.
	Progress func(msg string)
}

// DefaultJoinTimeout is how long Join waits for the whole job by default:
// ranks of a launcher may start seconds apart.
const DefaultJoinTimeout = 2 * time.Minute

// ConfigFromEnv reads the launchers' variables through lookup (os.LookupEnv
// in programs). Later sources override earlier ones field by field: Slurm,
// then Open MPI, then torchrun, then FERRY_*. With none set it returns rank
// 0 of a world of 1. Unparsable values fail with ErrInvalidConfig.
func ConfigFromEnv(lookup func(string) (string, bool)) (Config, error) {
	c := Config{WorldSize: 1, Master: DefaultMaster, Source: "default"}
	var err error
	num := func(name string, dst *int, source string) {
		v, ok := lookup(name)
		if !ok || err != nil {
			return
		}
		n, perr := strconv.Atoi(v)
		if perr != nil {
			err = fmt.Errorf("%s=%q is not a number: %w", name, v, ErrInvalidConfig)
			return
		}
		*dst = n
		if source != "" {
			c.Source = source
		}
	}
	layers := []struct{ source, rank, world, local string }{
		{"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
		{"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
		{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
		{"ferry", "FERRY_RANK", "FERRY_WORLD_SIZE", "FERRY_LOCAL_RANK"},
	}
	for _, l := range layers {
		num(l.rank, &c.Rank, l.source)
		num(l.world, &c.WorldSize, l.source)
		num(l.local, &c.LocalRank, "")
	}
	if addr, ok := lookup("MASTER_ADDR"); ok {
		// torchrun's own store already listens on MASTER_PORT, so ferry's
		// takes the next port.
		port := 29500
		num("MASTER_PORT", &port, "")
		c.Master = net.JoinHostPort(addr, strconv.Itoa(port+1))
	}
	if m, ok := lookup("FERRY_MASTER"); ok {
		c.Master = m
	}
	num("FERRY_LISTEN_FD", &c.ListenFD, "")
	num("FERRY_MAX_MESSAGE", &c.MaxMessage, "")
	if v, ok := lookup("FERRY_JOIN_TIMEOUT"); ok && err == nil {
		d, perr := time.ParseDuration(v)
		if perr != nil || d < 0 {
			err = fmt.Errorf("FERRY_JOIN_TIMEOUT=%q is not a duration: %w", v, ErrInvalidConfig)
		}
		c.JoinTimeout = d
	}
	if v, ok := lookup("FERRY_ALLOW_REMOTE"); ok {
		c.AllowRemote = v == "1" || v == "true"
	}
	if t, ok := lookup("FERRY_JOB_TOKEN"); ok {
		c.Token = t
	} else {
		// Without a secret, a launcher's job id at least keeps two jobs
		// on one machine from joining each other's stores.
		for _, k := range []string{"TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"} {
			if v, ok := lookup(k); ok && v != "" {
				c.Token = "job:" + k + "=" + v
				break
			}
		}
	}
	return c, err
}

// BindFlags registers -rank, -world-size, -local-rank, -master and
// -join-timeout on fs,
// with c's current values as defaults, so flags given on the command line
// override the environment. Call it after ConfigFromEnv and before
// fs.Parse. The token has no flag: command lines are visible to every
// user of the machine.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.Rank, "rank", c.Rank, "this process's rank (default from the launcher's environment)")
	fs.IntVar(&c.WorldSize, "world-size", c.WorldSize, "number of ranks in the job")
	fs.IntVar(&c.LocalRank, "local-rank", c.LocalRank, "rank among the processes of this machine")
	fs.StringVar(&c.Master, "master", c.Master, "rank 0's rendezvous address, host:port")
	fs.DurationVar(&c.JoinTimeout, "join-timeout", c.JoinTimeout, "how long to wait for every rank to join (0: 2m)")
}

// Validate checks c and returns it with defaults filled in. Errors wrap
// ErrInvalidConfig.
func (c Config) Validate() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return c, fmt.Errorf(format+": %w", append(args, ErrInvalidConfig)...)
	}
	if c.WorldSize < 1 || c.WorldSize > 1<<16 {
		return bad("world size %d outside [1, 65536]", c.WorldSize)
	}
	if c.Rank < 0 || c.Rank >= c.WorldSize {
		return bad("rank %d outside a world of %d", c.Rank, c.WorldSize)
	}
	if c.MaxMessage == 0 {
		c.MaxMessage = DefaultMaxMessage
	}
	if c.JoinTimeout < 0 {
		return bad("join timeout %v is negative", c.JoinTimeout)
	}
	if c.JoinTimeout == 0 {
		c.JoinTimeout = DefaultJoinTimeout
	}
	if c.MaxMessage < 0 || c.MaxMessage > 1<<30 {
		return bad("max message %d outside [1, 1 GiB]", c.MaxMessage)
	}
	if c.Listener != nil && c.Rank != 0 {
		return bad("a Listener is for rank 0, this is rank %d", c.Rank)
	}
	if c.WorldSize == 1 {
		return c, nil
	}
	if c.Token == "" {
		return bad("no job token: set FERRY_JOB_TOKEN (the same value on every rank)")
	}
	if len(c.Token) > maxToken {
		return bad("job token of %d bytes, limit %d", len(c.Token), maxToken)
	}
	if c.Listener != nil || (c.ListenFD > 0 && c.Rank == 0) {
		return c, nil
	}
	host, port, err := net.SplitHostPort(c.Master)
	if err != nil {
		return bad("master %q: %v", c.Master, err)
	}
	if host == "localhost" {
		// Resolving would ask the system resolver; loopback is meant.
		host = "127.0.0.1"
		c.Master = net.JoinHostPort(host, port)
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsLoopback() {
		return c, nil
	}
	if !c.AllowRemote {
		return bad("master %q is not a loopback address; set AllowRemote (FERRY_ALLOW_REMOTE=1) for a job that spans machines", c.Master)
	}
	return c, nil
}
