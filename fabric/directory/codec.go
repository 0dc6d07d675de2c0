package directory

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ferryrdma/ferry/fabric"
)

// Limits on what an entry may hold. Values read back are checked against
// them too, so a hostile writer cannot make readers decode or keep large
// values.
const (
	// MaxValueSize bounds an encoded entry or region.
	MaxValueSize = 16 << 10
	// MaxNameLen bounds engine, region and label names.
	MaxNameLen = 128
	// MaxLabels bounds the labels of an entry and the metadata of a region.
	MaxLabels = 64
	// MaxLabelValueLen bounds one label or metadata value.
	MaxLabelValueLen = 1024
	// MaxAddrs bounds the addresses of an entry (groups times NICs).
	MaxAddrs = 64
)

// wireVersion is the version of the stored form; readers refuse others.
const wireVersion = 1

// Entry states in the stored form. An orderly close first marks the entry
// closing, then removes it: a watcher that sees the removal of an entry
// last marked closing reports Closed, any other removal Lost.
const (
	stateUp      = "up"
	stateClosing = "closing"
)

type wireEntry struct {
	V      int               `json:"v"`
	Name   string            `json:"name"`
	NICs   int               `json:"nics"`
	Addrs  []string          `json:"addrs"`
	Labels map[string]string `json:"labels,omitempty"`
	State  string            `json:"state"`
}

type wireRegion struct {
	V      int               `json:"v"`
	Engine string            `json:"engine"`
	Name   string            `json:"name"`
	Desc   string            `json:"desc"`
	Meta   map[string]string `json:"meta,omitempty"`
}

// CheckName checks an engine or region name: 1 to MaxNameLen characters
// of [A-Za-z0-9._:-] (ErrInvalid otherwise). Backends check the names they
// are asked for, so a name cannot reach into another's keys.
func CheckName(what, s string) error { return checkName(what, s) }

// checkName accepts 1 to MaxNameLen characters of [A-Za-z0-9._:-]: names
// are parts of keys, so no slashes, and printable in logs.
func checkName(what, s string) error {
	if s == "" || len(s) > MaxNameLen {
		return fmt.Errorf("%s %q: length %d, want 1 to %d: %w", what, s, len(s), MaxNameLen, ErrInvalid)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' || c == ':') {
			return fmt.Errorf("%s %q: character %q: %w", what, s, c, ErrInvalid)
		}
	}
	return nil
}

func checkLabels(what string, m map[string]string) error {
	if len(m) > MaxLabels {
		return fmt.Errorf("%d %s, at most %d: %w", len(m), what, MaxLabels, ErrInvalid)
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if err := checkName(what+" key", k); err != nil {
			return err
		}
		if v := m[k]; len(v) > MaxLabelValueLen || strings.ContainsRune(v, 0) {
			return fmt.Errorf("%s %s: value of %d bytes (at most %d, no NUL): %w", what, k, len(v), MaxLabelValueLen, ErrInvalid)
		}
	}
	return nil
}

// Validate checks e against the entry rules: a valid name, 1 to
// fabric.MaxNICs NICs, a non-empty multiple of NICs addresses (at most
// MaxAddrs), none empty or repeated, and valid labels.
func (e Entry) Validate() error {
	if err := checkName("engine name", e.Name); err != nil {
		return err
	}
	if e.NICs < 1 || e.NICs > fabric.MaxNICs {
		return fmt.Errorf("engine %s: %d nics, want 1 to %d: %w", e.Name, e.NICs, fabric.MaxNICs, ErrInvalid)
	}
	if len(e.Addrs) == 0 || len(e.Addrs)%e.NICs != 0 || len(e.Addrs) > MaxAddrs {
		return fmt.Errorf("engine %s: %d addresses for %d nics (a multiple, at most %d): %w", e.Name, len(e.Addrs), e.NICs, MaxAddrs, ErrInvalid)
	}
	seen := make(map[fabric.Address]bool, len(e.Addrs))
	for i, a := range e.Addrs {
		if a.IsZero() {
			return fmt.Errorf("engine %s: address %d empty: %w", e.Name, i, ErrInvalid)
		}
		if seen[a] {
			return fmt.Errorf("engine %s: address %s repeated: %w", e.Name, a, ErrInvalid)
		}
		seen[a] = true
	}
	return checkLabels("label", e.Labels)
}

// checkRegion checks r's names and metadata, and its descriptor against
// its engine's entry e (when e is non-nil): the same NIC count, and only
// addresses e published.
func checkRegion(r Region, e *Entry) error {
	if err := checkName("engine name", r.Engine); err != nil {
		return err
	}
	if err := checkName("region name", r.Name); err != nil {
		return err
	}
	if err := checkLabels("metadata", r.Meta); err != nil {
		return err
	}
	n := len(r.Desc.NICs)
	if n < 1 || n > fabric.MaxNICs || r.Desc.Length == 0 {
		return fmt.Errorf("region %s/%s: descriptor with %d nics and length %d: %w", r.Engine, r.Name, n, r.Desc.Length, ErrInvalid)
	}
	if e == nil {
		return nil
	}
	if n != e.NICs {
		return fmt.Errorf("region %s/%s: descriptor has %d nics, engine has %d: %w", r.Engine, r.Name, n, e.NICs, ErrNICMismatch)
	}
	for i, k := range r.Desc.NICs {
		if !slices.Contains(e.Addrs, k.Addr) {
			if slices.ContainsFunc(e.Addrs, func(a fabric.Address) bool { return a.RawString() == k.Addr.RawString() }) {
				return fmt.Errorf("region %s/%s: descriptor nic %d address %s is an earlier engine's at the same endpoint: %w",
					r.Engine, r.Name, i, k.Addr, fabric.ErrStaleDescriptor)
			}
			return fmt.Errorf("region %s/%s: descriptor nic %d address %s is not the engine's: %w", r.Engine, r.Name, i, k.Addr, ErrNICMismatch)
		}
	}
	return nil
}

func encodeEntry(e Entry, state string) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	w := wireEntry{V: wireVersion, Name: e.Name, NICs: e.NICs, Labels: e.Labels, State: state}
	for _, a := range e.Addrs {
		w.Addrs = append(w.Addrs, a.String())
	}
	return sized(json.Marshal(w))
}

func encodeRegion(r Region, e *Entry) ([]byte, error) {
	if err := checkRegion(r, e); err != nil {
		return nil, err
	}
	// A descriptor no reader could decode (an unknown address mode) is
	// refused here rather than stored.
	var back fabric.Descriptor
	if err := back.UnmarshalText([]byte(r.Desc.String())); err != nil {
		return nil, fmt.Errorf("region %s/%s: %w: %w", r.Engine, r.Name, ErrInvalid, err)
	}
	w := wireRegion{V: wireVersion, Engine: r.Engine, Name: r.Name, Desc: r.Desc.String(), Meta: r.Meta}
	return sized(json.Marshal(w))
}

func sized(b []byte, err error) ([]byte, error) {
	if err != nil {
		return nil, fmt.Errorf("encode entry: %w: %w", ErrInvalid, err)
	}
	if len(b) > MaxValueSize {
		return nil, fmt.Errorf("encoded entry of %d bytes, at most %d: %w", len(b), MaxValueSize, ErrTooLarge)
	}
	return b, nil
}

// DecodeEntry decodes and validates a stored engine entry found under key,
// whose last element must be the entry's name. Backends use it on every
// value they read; failures are *EntryError. It also returns the entry's
// state (closing or not).
func DecodeEntry(key string, b []byte) (e Entry, closing bool, err error) {
	fail := func(err error) (Entry, bool, error) { return Entry{}, false, &EntryError{Key: key, Err: err} }
	if len(b) > MaxValueSize {
		return fail(fmt.Errorf("%d bytes, at most %d: %w", len(b), MaxValueSize, ErrTooLarge))
	}
	var w wireEntry
	if err := json.Unmarshal(b, &w); err != nil {
		return fail(fmt.Errorf("decode: %w: %w", ErrInvalid, err))
	}
	if w.V != wireVersion {
		return fail(fmt.Errorf("version %d, want %d: %w", w.V, wireVersion, ErrInvalid))
	}
	if w.State != stateUp && w.State != stateClosing {
		return fail(fmt.Errorf("state %q: %w", w.State, ErrInvalid))
	}
	if keyName(key) != w.Name {
		return fail(fmt.Errorf("name %q under another name's key: %w", w.Name, ErrInvalid))
	}
	if len(w.Addrs) > MaxAddrs {
		return fail(fmt.Errorf("%d addresses, at most %d: %w", len(w.Addrs), MaxAddrs, ErrInvalid))
	}
	e = Entry{Name: w.Name, NICs: w.NICs, Labels: w.Labels}
	for i, s := range w.Addrs {
		a, err := fabric.ParseAddress(s)
		if err != nil {
			return fail(fmt.Errorf("address %d: %w: %w", i, ErrInvalid, err))
		}
		e.Addrs = append(e.Addrs, a)
	}
	if err := e.Validate(); err != nil {
		return fail(err)
	}
	return e, w.State == stateClosing, nil
}

// DecodeRegion decodes and validates a stored region found under key
// against its engine's entry e (nil: checked on its own).
func DecodeRegion(key string, b []byte, e *Entry) (Region, error) {
	fail := func(err error) (Region, error) { return Region{}, &EntryError{Key: key, Err: err} }
	if len(b) > MaxValueSize {
		return fail(fmt.Errorf("%d bytes, at most %d: %w", len(b), MaxValueSize, ErrTooLarge))
	}
	var w wireRegion
	if err := json.Unmarshal(b, &w); err != nil {
		return fail(fmt.Errorf("decode: %w: %w", ErrInvalid, err))
	}
	if w.V != wireVersion {
		return fail(fmt.Errorf("version %d, want %d: %w", w.V, wireVersion, ErrInvalid))
	}
	if keyName(key) != w.Name {
		return fail(fmt.Errorf("region %q under another name's key: %w", w.Name, ErrInvalid))
	}
	d, err := fabric.ParseDescriptor(w.Desc)
	if err != nil {
		return fail(fmt.Errorf("descriptor: %w: %w", ErrInvalid, err))
	}
	r := Region{Engine: w.Engine, Name: w.Name, Desc: d, Meta: w.Meta}
	if e != nil && e.Name != r.Engine {
		return fail(fmt.Errorf("region of engine %q under engine %q: %w", r.Engine, e.Name, ErrInvalid))
	}
	if err := checkRegion(r, e); err != nil {
		return fail(err)
	}
	return r, nil
}

// EncodeEntry returns the stored form of e (state up); EncodeRegion that
// of r, checked against its engine's entry e. Backends store these.
func EncodeEntry(e Entry) ([]byte, error) { return encodeEntry(e, stateUp) }

// EncodeClosing returns the stored form of e marked closing: what an
// orderly close writes before it removes the entry.
func EncodeClosing(e Entry) ([]byte, error) { return encodeEntry(e, stateClosing) }

// EncodeRegion returns the stored form of r, checked against e.
func EncodeRegion(r Region, e Entry) ([]byte, error) { return encodeRegion(r, &e) }

func keyName(key string) string { return key[strings.LastIndexByte(key, '/')+1:] }
