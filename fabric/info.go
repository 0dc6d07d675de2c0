package fabric

import (
	"sync/atomic"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// Info describes a running engine.
type Info struct {
	Provider  string
	Transport string
	Reason    string // why this transport was chosen
	Poll      PollMode
	Main      Address
	LinkSpeed uint64 // sum over all domains, bits per second
	Groups    []GroupInfo
	// Library is the native library the provider runs on, when it names
	// one (LibraryReporter); zero otherwise.
	Library LibraryInfo
}

// GroupInfo describes one worker.
type GroupInfo struct {
	Device  Device
	Pinned  bool
	CPU     int
	Domains []DomainStatus
}

// DomainStatus is one open domain.
type DomainStatus struct {
	DomainInfo
	Address Address
}

// Info reports the provider, transport, poll mode and every domain.
func (e *Engine) Info() Info {
	if e == nil {
		return Info{}
	}
	in := Info{Provider: e.choice.Provider.Name(), Transport: e.choice.Transport, Reason: e.choice.Reason,
		Poll: e.cfg.Poll, Main: e.MainAddress()}
	if lr, ok := e.choice.Provider.(rdma.LibraryReporter); ok {
		in.Library = lr.Library()
	}
	for _, w := range e.workers {
		g := GroupInfo{Device: w.dev, Pinned: w.spec.Pin, CPU: w.spec.CPU}
		for _, ds := range w.doms {
			g.Domains = append(g.Domains, DomainStatus{DomainInfo: ds.info, Address: ds.addr})
			in.LinkSpeed += ds.info.LinkSpeed
		}
		in.Groups = append(in.Groups, g)
	}
	return in
}

// Stats is a snapshot of the engine's counters.
type Stats struct {
	Completed uint64 // transfers that succeeded
	Failed    uint64 // transfers that failed
	// Expired counts the failed transfers that ended at their deadline or
	// by their context, with operations possibly still fenced.
	Expired uint64
	// Late counts completions that came back for operations the engine
	// had already given up on (their peer was lost): absorbed, harmless.
	Late uint64
	// Unmatched counts completions that named no operation (a provider
	// error completion without its context); each triggers a peer check.
	Unmatched uint64
	// PeersLost counts peers declared lost (per NIC address and loss).
	PeersLost uint64
	// Unclaimed is how many immediates are held now: they arrived with no
	// counter and no OnImm callback, and the next counter registered for
	// their value takes them. Nothing is dropped.
	Unclaimed uint64
	// ImmsDropped counts immediates that arrived for a lease-range value
	// not leased at the time (a retired lease's late writes): dropped,
	// never credited to a later lease.
	ImmsDropped uint64
	// NotificationsDropped counts notifications that arrived but could
	// not be delivered: their lease's queue was full, or they were
	// overwritten in the mailbox before they were read. Each is also
	// reported to the lease's WaitNotification (ErrNotificationsLost).
	NotificationsDropped uint64
	Domains              []DomainSnapshot
}

// DomainSnapshot is one domain's counters.
type DomainSnapshot struct {
	Device      Device
	Name        string
	Index       int
	Posted      uint64
	Bytes       uint64
	Completions uint64
	Errors      uint64
	Imms        uint64
	InFlight    int64
	// Peers counts the peer addresses resolved on the NIC: by Connect,
	// or by the first operation to each.
	Peers int64
}

// Stats returns the current counters: Completed counts every transfer
// whose completion was delivered before the call (as TransferHistograms
// does). Safe to call at any time.
func (e *Engine) Stats() Stats {
	if e == nil {
		return Stats{}
	}
	e.syncCounts()
	s := Stats{Completed: e.completed.Load(), Failed: e.failures.Load(), Expired: e.expired.Load(), Late: e.late.Load(),
		Unmatched: e.unmatchedErrs.Load(), PeersLost: e.peersLost.Load(), Unclaimed: e.unclaimed.Load(),
		ImmsDropped: e.immsDropped.Load(), NotificationsDropped: e.notesDropped.Load()}
	for _, w := range e.workers {
		for i, ds := range w.doms {
			st := &ds.stats
			s.Domains = append(s.Domains, DomainSnapshot{Device: w.dev, Name: st.Name, Index: i,
				Posted: st.Posted.Load(), Bytes: st.Bytes.Load(), Completions: st.Completions.Load(),
				Errors: st.Errors.Load(), Imms: st.Imms.Load(), InFlight: st.InFlight.Load(),
				Peers: st.Peers.Load()})
		}
	}
	return s
}

type engineCounters struct {
	completed atomic.Uint64
	failures  atomic.Uint64
	expired   atomic.Uint64
	late      atomic.Uint64
	// unmatchedErrs counts completions naming no operation.
	unmatchedErrs atomic.Uint64
	peersLost     atomic.Uint64
	unclaimed     atomic.Uint64
	immsDropped   atomic.Uint64
	notesDropped  atomic.Uint64
}
