package directory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/ferryrdma/ferry/fabric"
)

// Errors. Every error of this package wraps one of them, so errors.Is
// tells the cases apart; entries read from a backend that fail validation
// come as an *EntryError naming their key.
var (
	// ErrNotFound: no entry under that name.
	ErrNotFound = errors.New("directory: not found")
	// ErrExists: a live publication already holds the name.
	ErrExists = errors.New("directory: name taken")
	// ErrInvalid: an argument or a stored entry breaks the entry rules
	// (names, labels, versions, addresses, NIC counts; see Validate).
	ErrInvalid = errors.New("directory: invalid entry")
	// ErrTooLarge: an entry's encoded form exceeds MaxValueSize.
	ErrTooLarge = errors.New("directory: entry too large")
	// ErrNICMismatch: a region's descriptor does not match its engine's
	// entry: another NIC count, or an address the engine did not publish.
	ErrNICMismatch = errors.New("directory: descriptor does not match its engine")
	// ErrClosed: the directory or publication is closed.
	ErrClosed = errors.New("directory: closed")
	// ErrEntryLost is the cause given to fabric for a peer whose entry
	// expired: its process stopped renewing it (died, hung, or cut off).
	ErrEntryLost = errors.New("directory entry expired")
	// ErrEntryClosed is the cause given to fabric for a peer that closed
	// its entry in order.
	ErrEntryClosed = errors.New("directory entry closed by its engine")
)

// EntryError is a stored entry that failed validation: a malformed,
// oversize or mismatched value a buggy or hostile writer left under the
// prefix. It wraps the reason (ErrInvalid, ErrTooLarge, ErrNICMismatch).
type EntryError struct {
	Key string
	Err error
}

func (e *EntryError) Error() string { return "directory entry " + e.Key + ": " + e.Err.Error() }

// Unwrap returns the reason.
func (e *EntryError) Unwrap() error { return e.Err }

// Entry is what an engine publishes about itself.
type Entry struct {
	// Name identifies the engine under the prefix; one live publication
	// holds it at a time.
	Name string
	// NICs is the NIC count of the engine's main group: the count every
	// descriptor of its regions has.
	NICs int
	// Addrs are the engine's NIC endpoint addresses: the main group's in
	// NIC order (Addrs[0] is the engine's main address), then those of its
	// other groups. Their count is a multiple of NICs.
	Addrs []fabric.Address
	// Labels say what the engine is for: role=prefill, model=..., shard=3.
	Labels map[string]string
}

// Main returns the engine's main address (its main group's NIC 0).
func (e Entry) Main() fabric.Address {
	if len(e.Addrs) == 0 {
		return fabric.Address{}
	}
	return e.Addrs[0]
}

// Clone returns a deep copy.
func (e Entry) Clone() Entry {
	e.Addrs = slices.Clone(e.Addrs)
	e.Labels = maps.Clone(e.Labels)
	return e
}

// EntryOf returns the entry for eng under name with labels: its NIC count
// and the addresses of all its groups, main group first.
func EntryOf(eng *fabric.Engine, name string, labels map[string]string) (Entry, error) {
	if eng == nil {
		return Entry{}, fmt.Errorf("entry of %q: nil engine: %w", name, ErrInvalid)
	}
	info := eng.Info()
	if len(info.Groups) == 0 {
		return Entry{}, fmt.Errorf("entry of %q: engine has no groups: %w", name, ErrClosed)
	}
	e := Entry{Name: name, NICs: len(info.Groups[0].Domains), Labels: maps.Clone(labels)}
	for _, g := range info.Groups {
		for _, d := range g.Domains {
			e.Addrs = append(e.Addrs, d.Address)
		}
	}
	return e, e.Validate()
}

// Region is a named registered region an engine publishes.
type Region struct {
	Engine string // the publishing engine's Name
	Name   string
	Desc   fabric.Descriptor
	Meta   map[string]string // what the region holds: layer=3, dtype=bf16
}

// EventKind says what happened to an entry.
type EventKind uint8

const (
	// Joined: an entry appeared (or was there when the watch began).
	Joined EventKind = iota + 1
	// Updated: a live entry changed (it was published again).
	Updated
	// Lost: an entry vanished without an orderly close: its lease ran out
	// because its process died, hung or was cut off from the directory.
	Lost
	// Closed: an engine closed its publication in order.
	Closed
	// Rejected: a value under the prefix failed validation; Err says why.
	Rejected
)

func (k EventKind) String() string {
	switch k {
	case Joined:
		return "joined"
	case Updated:
		return "updated"
	case Lost:
		return "lost"
	case Closed:
		return "closed"
	case Rejected:
		return "rejected"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one change seen by a watch. Lost and Closed events carry the
// entry as it was last seen.
type Event struct {
	Kind  EventKind
	Entry Entry
	Err   error // Rejected only: an *EntryError
}

// Directory is a shared view of engines and their regions under one
// prefix. Implementations are safe for concurrent use.
type Directory interface {
	// Publish announces e under a lease this process keeps alive; the
	// entry and the publication's regions vanish when the process stops
	// renewing it, or at once on Publication.Close. It fails with
	// ErrExists while another live publication holds e.Name.
	Publish(ctx context.Context, e Entry) (Publication, error)
	// Lookup returns the engine entry called name.
	Lookup(ctx context.Context, name string) (Entry, error)
	// Select returns the live engine entries sel matches, sorted by name.
	// Entries that fail validation are left out, and reported in err (a
	// join of *EntryError) beside the valid ones.
	Select(ctx context.Context, sel Selector) ([]Entry, error)
	// Region returns the region name published by engine, checked against
	// the engine's entry (ErrNICMismatch).
	Region(ctx context.Context, engine, name string) (Region, error)
	// Watch reports the engines under the prefix: a Joined event per live
	// entry first, then every change, until ctx ends or the directory is
	// closed, when the channel closes.
	Watch(ctx context.Context) (<-chan Event, error)
	// Close ends the directory's watches and its publications' renewal;
	// it does not remove entries (close publications for that).
	Close() error
}

// Publication is one live entry and the regions published with it.
type Publication interface {
	// Entry returns the published entry.
	Entry() Entry
	// PublishRegion publishes (or replaces) the region name, under the
	// publication's lease. The descriptor must match the entry's NICs.
	PublishRegion(ctx context.Context, name string, d fabric.Descriptor, meta map[string]string) error
	// WithdrawRegion removes the region name.
	WithdrawRegion(ctx context.Context, name string) error
	// SetLabels replaces the entry's labels (a role that changed, a load
	// figure): watchers see Updated.
	SetLabels(ctx context.Context, labels map[string]string) error
	// Close removes the entry and its regions in order: watchers see
	// Closed, not Lost.
	Close(ctx context.Context) error
}
