package fabricbench

import "testing"

// The raw loop's ceiling runs the engine case's layout: the same page
// offsets, inside the same span.
func TestRawOffsetsFollowTheCaseLayout(t *testing.T) {
	const span = 64 << 20
	paged := Case{Workload: Paged, Bytes: 64, Pages: 1000}
	got, err := rawOffsets(paged, 7, span)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLayout(paged, 7, span)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != paged.Pages {
		t.Fatalf("%d offsets for %d pages", len(got), paged.Pages)
	}
	var spread uint64
	for i, o := range got {
		if o != l.pageOffset(i) || o+paged.Bytes > span {
			t.Fatalf("offset %d = %d, layout says %d (span %d)", i, o, l.pageOffset(i), span)
		}
		spread = max(spread, o)
	}
	// Pages spread over the span, not packed at its start.
	if spread < span/2 {
		t.Fatalf("largest offset %d of a %d-byte span", spread, span)
	}
	single, err := rawOffsets(Case{Workload: Single, Bytes: 1 << 20}, 7, span)
	if err != nil || len(single) != 1 || single[0] != Offset {
		t.Fatalf("single write: %v, %v; want [%d]", single, err, Offset)
	}
	if _, err := rawOffsets(Case{Workload: Single, Bytes: span}, 7, span); err == nil {
		t.Fatal("a write larger than the span was laid out")
	}
}
