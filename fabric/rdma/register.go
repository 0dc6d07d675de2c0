package rdma

// RegistrationMode says from where the engine may call a domain's
// RegisterMemory and UnregisterMemory. Registration pins memory and can
// take a long time (hundreds of milliseconds for a GiB on a real NIC); a
// worker that registers is a worker that polls nothing meanwhile, so the
// engine moves the calls off the worker as far as the domain allows.
type RegistrationMode int

const (
	// RegisterOnWorker: only the worker's thread, one domain after
	// another. The default for domains that do not implement Registrar.
	RegisterOnWorker RegistrationMode = iota
	// RegisterNICsInParallel: any goroutine may call, but never while
	// another call on the same domain runs (libfabric's FI_THREAD_DOMAIN).
	// The worker waits while the domains of its group register at once,
	// each on its own goroutine.
	RegisterNICsInParallel
	// RegisterBeside: any goroutine may call, concurrently with each
	// other and with the worker's calls on the domain (but never with
	// Close, which the engine calls only once no registration runs). The
	// engine registers beside the worker, every domain of a group at
	// once, and the worker's transfers never wait for it.
	RegisterBeside
)

func (m RegistrationMode) String() string {
	switch m {
	case RegisterOnWorker:
		return "on-worker"
	case RegisterNICsInParallel:
		return "nics-in-parallel"
	case RegisterBeside:
		return "beside-worker"
	}
	return "registration-mode(?)"
}

// Registrar is implemented by domains whose registration calls need not
// run on their worker's thread (see RegistrationMode).
type Registrar interface {
	RegistrationMode() RegistrationMode
}
