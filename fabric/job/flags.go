package job

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/rendezvous"
)

// ErrUsage marks bad flags; programs exit with status 2 on it.
var ErrUsage = errors.New("usage")

// ErrInterrupted marks a run stopped by SIGINT or SIGTERM; programs exit
// with status 130 on it.
var ErrInterrupted = errors.New("interrupted")

// ErrMismatch marks a payload that did not verify; programs exit with
// status 3 on it.
var ErrMismatch = errors.New("payload mismatch")

// transport is what a -provider name opens.
type transport struct {
	name string // fabric.Config.Transport
	node string // fabric.Config.Node
	// inproc is whether several engines of this transport may live in one
	// process: libfabric 1.17's shm hands same-process peers its region
	// directly, and closing one of two such endpoints after traffic can
	// crash the other.
	inproc bool
	// procs is whether ranks in different processes can reach each other.
	procs bool
}

// providers maps the -provider names to transports. tcp is pinned to the
// loopback address so a program never sends tcp traffic off the host.
var providers = map[string]transport{
	"mem":         {name: "mem", inproc: true},
	"shm":         {name: "shm", procs: true},
	"tcp":         {name: "tcp;ofi_rxm", node: "127.0.0.1", inproc: true, procs: true},
	"tcp;ofi_rxm": {name: "tcp;ofi_rxm", node: "127.0.0.1", inproc: true, procs: true},
	"verbs":       {name: "verbs", inproc: true, procs: true},
	"efa":         {name: "efa", inproc: true, procs: true},
	"ipc":         {name: "ipc", inproc: true, procs: true},
}

// Transport returns what a -provider name opens: the fabric.Config
// Transport and Node.
func Transport(provider string) (transport, node string, ok bool) {
	t, ok := providers[provider]
	return t.name, t.node, ok
}

// ProviderNames lists the -provider values, for usage text.
func ProviderNames() string {
	names := make([]string, 0, len(providers))
	for n := range providers {
		if n != "tcp;ofi_rxm" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// Options are the flags every program built on this package shares.
type Options struct {
	Provider string        // -provider: mem, shm, tcp, verbs, efa
	NICs     int           // -nics: domains per engine
	Poll     string        // -poll: adaptive or spin
	Launch   string        // -launch: auto, spawn, inproc or env
	JSON     string        // -json: file to write the results to, "-" for stdout
	Timeout  time.Duration // -timeout: bound on the whole run
	Verbose  bool          // -v: log the engines' lifecycle

	rdv    rendezvous.Config
	rdvErr error
	argv   []string // the command line, for spawn
}

// Bind registers the shared flags on fs. Call it before fs.Parse; the
// rendezvous flags (-rank, -world-size, -master) default to what a launcher
// put in the environment.
func (o *Options) Bind(fs *flag.FlagSet) {
	fs.StringVar(&o.Provider, "provider", "", "transport, required: "+ProviderNames())
	fs.IntVar(&o.NICs, "nics", 1, "NICs (domains) per engine")
	fs.StringVar(&o.Poll, "poll", "adaptive", "worker polling: adaptive or spin")
	fs.StringVar(&o.Launch, "launch", "auto", "how ranks start: spawn (child processes), inproc (goroutines, one engine each), "+
		"env (this process is one rank of a launcher's job), auto (env under a launcher, inproc for mem, else spawn)")
	fs.StringVar(&o.JSON, "json", "", "also write the results as JSON to `FILE` (- for stdout; the text then goes to stderr)")
	fs.DurationVar(&o.Timeout, "timeout", 2*time.Minute, "bound on the whole run")
	fs.BoolVar(&o.Verbose, "v", false, "log the engines' lifecycle")
	o.rdv, o.rdvErr = rendezvous.ConfigFromEnv(os.LookupEnv)
	o.rdv.BindFlags(fs)
	o.argv = os.Args
}

// Parse parses args into fs (the shared flags and the program's own) and
// checks the shared ones. The flag package has already reported a bad or
// unknown flag, and -h, when Parse returns; ExitCode stays quiet about them.
func (o *Options) Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return parseError{err}
	}
	return o.Check()
}

// parseError is a flag error the flag package has printed already.
type parseError struct{ err error }

func (e parseError) Error() string   { return e.err.Error() }
func (e parseError) Unwrap() []error { return []error{e.err, ErrUsage} }

// Check validates the shared flags after parsing.
func (o *Options) Check() error {
	if o.Provider == "" {
		return fmt.Errorf("%w: -provider is required (%s)", ErrUsage, ProviderNames())
	}
	if _, ok := providers[o.Provider]; !ok {
		return fmt.Errorf("%w: unknown -provider %q (%s)", ErrUsage, o.Provider, ProviderNames())
	}
	if _, err := fabric.ParsePollMode(o.Poll); err != nil {
		return fmt.Errorf("%w: -poll: %v", ErrUsage, err)
	}
	if !slices.Contains([]string{"auto", "spawn", "inproc", "env"}, o.Launch) {
		return fmt.Errorf("%w: -launch %q: want auto, spawn, inproc or env", ErrUsage, o.Launch)
	}
	if o.NICs < 1 || o.NICs > fabric.MaxNICs {
		return fmt.Errorf("%w: -nics %d: want 1 to %d", ErrUsage, o.NICs, fabric.MaxNICs)
	}
	if o.Timeout <= 0 {
		return fmt.Errorf("%w: -timeout must be positive", ErrUsage)
	}
	return o.rdvErr
}

// launchMode resolves -launch auto.
func (o *Options) launchMode() string {
	if o.Launch != "auto" {
		return o.Launch
	}
	switch {
	case o.rdv.Source != "default" || o.rdv.WorldSize > 1:
		return "env"
	case !providers[o.Provider].procs:
		return "inproc"
	default:
		return "spawn"
	}
}
