package rendezvous_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/ferryrdma/ferry/fabric/rendezvous"
)

// BenchmarkAllGather measures one collective among 8 ranks in one process
// over loopback TCP. Every rank must run the same number of collectives,
// so the loop counts to b.N rather than using b.Loop, whose count the
// other ranks cannot know in advance.
func BenchmarkAllGather(b *testing.B) {
	for _, size := range []int{64, 64 << 10} {
		b.Run(fmt.Sprintf("ranks=8/bytes=%d", size), func(b *testing.B) {
			cfgs := worldB(b, 8)
			gs, errs := joinAll(context.Background(), cfgs, []int{0, 1, 2, 3, 4, 5, 6, 7})
			defer closeAll(gs)
			if err := errors.Join(errs...); err != nil {
				b.Fatal(err)
			}
			data := make([]byte, size)
			b.SetBytes(int64(size * 8))
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for _, g := range gs {
				wg.Go(func() {
					for range b.N {
						if _, err := g.AllGather(context.Background(), data); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

func worldB(b *testing.B, n int) []rendezvous.Config {
	cfgs, err := newWorld(n)
	if err != nil {
		b.Fatal(err)
	}
	return cfgs
}
