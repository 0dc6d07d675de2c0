package directory_test

import (
	"context"
	"fmt"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/directory"
	_ "github.com/ferryrdma/ferry/memfabric" // the mem transport
)

// A prefill engine publishes itself and its KV cache region; a decode
// engine selects prefill engines by label and finds the region.
func Example() {
	ctx := context.Background()
	dir := directory.NewMemory()
	defer dir.Close()

	prefill, err := fabric.Open(ctx, fabric.Config{Transport: "mem"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer prefill.Close(ctx)
	buf, _ := fabric.AllocHost(1 << 16)
	defer buf.Free()
	kv, _ := prefill.RegisterHost(buf, fabric.AccessRemoteWrite)
	desc, _ := kv.Descriptor()

	entry, _ := directory.EntryOf(prefill, "prefill-0", map[string]string{"role": "prefill", "model": "m1"})
	pub, err := dir.Publish(ctx, entry)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = pub.PublishRegion(ctx, "kv-cache", desc, map[string]string{"layers": "32"})

	sel, _ := directory.ParseSelector("role=prefill,model=m1")
	found, _ := dir.Select(ctx, sel)
	for _, e := range found {
		r, err := dir.Region(ctx, e.Name, "kv-cache")
		fmt.Println(e.Name, e.NICs, r.Desc.Length, r.Meta["layers"], err)
	}
	_ = pub.Close(ctx)
	// Output: prefill-0 1 65536 32 <nil>
}

// A watch reports the entries present, then joins and leaves: an orderly
// close is Closed, an entry that expired is Lost.
func ExampleDirectory_Watch() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := directory.NewMemory()
	defer dir.Close()
	addr := func(s string) fabric.Address { a, _ := fabric.AddressFromRaw([]byte(s)); return a }

	a, _ := dir.Publish(ctx, directory.Entry{Name: "a", NICs: 1, Addrs: []fabric.Address{addr("a0")}})
	events, _ := dir.Watch(ctx)
	_, _ = dir.Publish(ctx, directory.Entry{Name: "b", NICs: 1, Addrs: []fabric.Address{addr("b0")}})
	_ = a.Close(ctx)
	_ = dir.Expire("b") // what a lease running out looks like
	for range 4 {
		ev := <-events
		fmt.Println(ev.Kind, ev.Entry.Name)
	}
	// Output:
	// joined a
	// joined b
	// closed a
	// lost b
}
