package osyield

import (
	"runtime"
	"testing"
)

// TestNew: New yields with Gosched exactly when the process has one P.
func TestNew(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	if y := New(); !y.soleP {
		t.Fatal("GOMAXPROCS 1: New did not choose Gosched")
	}
	runtime.GOMAXPROCS(2)
	if y := New(); y.soleP {
		t.Fatal("GOMAXPROCS 2: New chose Gosched")
	}
	// Both kinds return (a yield only gives the core away once).
	New().Yield()
	Yielder{soleP: true}.Yield()
}
