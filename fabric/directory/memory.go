package directory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/ferryrdma/ferry/fabric"
)

// Memory is an in-process Directory: engines of one process (tests, a
// single host running several engines) find each other through it with no
// server. There are no leases: an entry lives until its publication is
// closed (Closed) or Expire drops it (Lost), which is how a supervisor that
// saw a worker process die reports it. Values go through the same
// encoding and checks as the etcd backend's.
type Memory struct {
	mu       sync.Mutex
	closed   bool
	engines  map[string]*memEngine
	watchers map[*memWatcher]struct{}
}

type memEngine struct {
	entry   Entry
	regions map[string][]byte // stored form, by region name
	pub     *memPublication
}

// NewMemory returns an empty in-process directory.
func NewMemory() *Memory {
	return &Memory{engines: make(map[string]*memEngine), watchers: make(map[*memWatcher]struct{})}
}

var _ Directory = (*Memory)(nil)

// Publish implements Directory.
func (m *Memory) Publish(ctx context.Context, e Entry) (Publication, error) {
	b, err := EncodeEntry(e)
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", e.Name, err)
	}
	// Store what a reader of the stored form gets back.
	e, _, err = DecodeEntry(e.Name, b)
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", e.Name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("publish %s: %w", e.Name, ErrClosed)
	}
	if _, ok := m.engines[e.Name]; ok {
		return nil, fmt.Errorf("publish %s: %w", e.Name, ErrExists)
	}
	p := &memPublication{m: m, entry: e}
	m.engines[e.Name] = &memEngine{entry: e, regions: make(map[string][]byte), pub: p}
	m.emit(Event{Kind: Joined, Entry: e.Clone()})
	return p, nil
}

// Expire drops the entry name and its regions as an expired lease would:
// watchers see Lost, and its publication fails from then on.
func (m *Memory) Expire(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	me, ok := m.engines[name]
	if !ok {
		return fmt.Errorf("expire %s: %w", name, ErrNotFound)
	}
	delete(m.engines, name)
	me.pub.dead = true
	m.emit(Event{Kind: Lost, Entry: me.entry.Clone()})
	return nil
}

// Lookup implements Directory.
func (m *Memory) Lookup(ctx context.Context, name string) (Entry, error) {
	if err := checkName("engine name", name); err != nil {
		return Entry{}, fmt.Errorf("lookup: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Entry{}, fmt.Errorf("lookup %s: %w", name, ErrClosed)
	}
	me, ok := m.engines[name]
	if !ok {
		return Entry{}, fmt.Errorf("lookup %s: %w", name, ErrNotFound)
	}
	return me.entry.Clone(), nil
}

// Select implements Directory.
func (m *Memory) Select(ctx context.Context, sel Selector) ([]Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("select %s: %w", sel, ErrClosed)
	}
	var out []Entry
	for _, name := range slices.Sorted(maps.Keys(m.engines)) {
		if e := m.engines[name].entry; sel.Matches(e) {
			out = append(out, e.Clone())
		}
	}
	return out, nil
}

// Region implements Directory.
func (m *Memory) Region(ctx context.Context, engine, name string) (Region, error) {
	if err := errors.Join(checkName("engine name", engine), checkName("region name", name)); err != nil {
		return Region{}, fmt.Errorf("region: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Region{}, fmt.Errorf("region %s/%s: %w", engine, name, ErrClosed)
	}
	me, ok := m.engines[engine]
	if !ok {
		return Region{}, fmt.Errorf("region %s/%s: engine: %w", engine, name, ErrNotFound)
	}
	b, ok := me.regions[name]
	if !ok {
		return Region{}, fmt.Errorf("region %s/%s: %w", engine, name, ErrNotFound)
	}
	return DecodeRegion(engine+"/"+name, b, &me.entry)
}

// Watch implements Directory.
func (m *Memory) Watch(ctx context.Context) (<-chan Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("watch: %w", ErrClosed)
	}
	w := &memWatcher{wake: make(chan struct{}, 1), done: make(chan struct{})}
	for _, name := range slices.Sorted(maps.Keys(m.engines)) {
		w.queue = append(w.queue, Event{Kind: Joined, Entry: m.engines[name].entry.Clone()})
	}
	m.watchers[w] = struct{}{}
	out := make(chan Event)
	go func() {
		defer close(out)
		defer func() {
			m.mu.Lock()
			delete(m.watchers, w)
			m.mu.Unlock()
		}()
		for {
			m.mu.Lock()
			q := w.queue
			w.queue = nil
			m.mu.Unlock()
			for _, ev := range q {
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				case <-w.done:
					return
				}
			}
			select {
			case <-w.wake:
			case <-ctx.Done():
				return
			case <-w.done:
				return
			}
		}
	}()
	return out, nil
}

// Close implements Directory: watches end; entries stay readable to no one.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed {
		m.closed = true
		for w := range m.watchers {
			close(w.done)
		}
	}
	return nil
}

// emit queues ev for every watcher. Called with m.mu held.
func (m *Memory) emit(ev Event) {
	for w := range m.watchers {
		w.queue = append(w.queue, ev)
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// memWatcher's queue is unbounded so that publishing never waits for a
// slow watcher; it belongs to Memory.mu.
type memWatcher struct {
	queue []Event
	wake  chan struct{}
	done  chan struct{}
}

type memPublication struct {
	m      *Memory
	entry  Entry
	dead   bool // expired or closed; under m.mu
	closed bool
}

var errExpired = errors.New("entry expired")

func (p *memPublication) Entry() Entry {
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	return p.entry.Clone()
}

func (p *memPublication) SetLabels(ctx context.Context, labels map[string]string) error {
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	e := p.entry.Clone()
	e.Labels = maps.Clone(labels)
	if _, err := EncodeEntry(e); err != nil {
		return fmt.Errorf("set labels of %s: %w", e.Name, err)
	}
	me, err := p.live()
	if err != nil {
		return fmt.Errorf("set labels of %s: %w", e.Name, err)
	}
	p.entry, me.entry = e, e
	p.m.emit(Event{Kind: Updated, Entry: e.Clone()})
	return nil
}

// live returns the engine record, or why the publication cannot change it.
// Called with m.mu held.
func (p *memPublication) live() (*memEngine, error) {
	switch {
	case p.closed, p.m.closed:
		return nil, ErrClosed
	case p.dead:
		return nil, fmt.Errorf("%w: %w", errExpired, ErrNotFound)
	}
	return p.m.engines[p.entry.Name], nil
}

func (p *memPublication) PublishRegion(ctx context.Context, name string, d fabric.Descriptor, meta map[string]string) error {
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	r := Region{Engine: p.entry.Name, Name: name, Desc: d, Meta: meta}
	b, err := EncodeRegion(r, p.entry)
	if err != nil {
		return fmt.Errorf("publish region %s/%s: %w", p.entry.Name, name, err)
	}
	me, err := p.live()
	if err != nil {
		return fmt.Errorf("publish region %s/%s: %w", p.entry.Name, name, err)
	}
	me.regions[name] = b
	return nil
}

func (p *memPublication) WithdrawRegion(ctx context.Context, name string) error {
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	me, err := p.live()
	if err != nil {
		return fmt.Errorf("withdraw region %s/%s: %w", p.entry.Name, name, err)
	}
	if _, ok := me.regions[name]; !ok {
		return fmt.Errorf("withdraw region %s/%s: %w", p.entry.Name, name, ErrNotFound)
	}
	delete(me.regions, name)
	return nil
}

func (p *memPublication) Close(ctx context.Context) error {
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if p.dead || p.m.closed {
		return nil
	}
	p.dead = true
	delete(p.m.engines, p.entry.Name)
	p.m.emit(Event{Kind: Closed, Entry: p.entry.Clone()})
	return nil
}
