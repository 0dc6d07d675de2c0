package fabric

import (
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReqRingLaps: the ring refuses a push once full, takes in order, and
// frees each slot for the next lap (positions run past the ring's size
// many times).
func TestReqRingLaps(t *testing.T) {
	var q reqRing
	q.init(8)
	next, taken := uint32(0), uint32(0)
	for lap := 0; lap < 50; lap++ {
		for q.push(&request{imm: next}) {
			next++
		}
		require.Equal(t, uint32(8), next-taken, "a full ring holds its size, no more")
		// Take a few, then a push fits again.
		for i := 0; i < 3+lap%5; i++ {
			r := q.peek()
			require.NotNil(t, r)
			require.Equal(t, taken, r.imm, "taken in order")
			q.pop()
			taken++
		}
		require.False(t, q.empty())
	}
	for r := q.peek(); r != nil; r = q.peek() {
		require.Equal(t, taken, r.imm)
		q.pop()
		taken++
	}
	require.True(t, q.empty())
	require.Equal(t, next, taken)
	require.Equal(t, request{}, q.slots[0].r, "a taken slot keeps no references")
}

// TestReqRingConcurrent: submitters pushing at once lose nothing and
// duplicate nothing, and each one's requests come out in its order.
func TestReqRingConcurrent(t *testing.T) {
	var q reqRing
	q.init(64)
	const producers, each = 4, 2000
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; {
				if q.push(&request{imm: uint32(i), slot: int32(p)}) {
					i++
				} else {
					runtime.Gosched()
				}
			}
		}()
	}
	next := make([]uint32, producers)
	for n := 0; n < producers*each; {
		r := q.peek()
		if r == nil {
			runtime.Gosched()
			continue
		}
		require.Equal(t, next[r.slot], r.imm, "producer %d out of order", r.slot)
		next[r.slot]++
		q.pop()
		n++
	}
	wg.Wait()
	require.True(t, q.empty())
}
