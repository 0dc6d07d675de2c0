package directory

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Selector matches entries by their labels: every requirement must hold.
// The zero Selector matches everything.
type Selector struct {
	reqs []requirement
}

type requirement struct {
	key, value string
	exists     bool // key present, any value
	not        bool // value must differ (or key absent)
}

// ParseSelector parses a comma list of requirements: key=value,
// key!=value, or key alone (the label is present). "role=prefill,model=x"
// matches entries labelled with both.
func ParseSelector(s string) (Selector, error) {
	var sel Selector
	if strings.TrimSpace(s) == "" {
		return sel, nil
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		var r requirement
		switch {
		case strings.Contains(part, "!="):
			r.key, r.value, _ = strings.Cut(part, "!=")
			r.not = true
		case strings.Contains(part, "="):
			r.key, r.value, _ = strings.Cut(part, "=")
		default:
			r.key, r.exists = part, true
		}
		r.key, r.value = strings.TrimSpace(r.key), strings.TrimSpace(r.value)
		if err := checkName("selector key", r.key); err != nil {
			return Selector{}, fmt.Errorf("parse selector %q: %w", s, err)
		}
		sel.reqs = append(sel.reqs, r)
	}
	return sel, nil
}

// SelectorOf returns the selector matching every label of labels.
func SelectorOf(labels map[string]string) Selector {
	var sel Selector
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		sel.reqs = append(sel.reqs, requirement{key: k, value: labels[k]})
	}
	return sel
}

// Matches reports whether e's labels meet every requirement.
func (s Selector) Matches(e Entry) bool {
	for _, r := range s.reqs {
		v, ok := e.Labels[r.key]
		switch {
		case r.exists && !ok, r.not && ok && v == r.value, !r.exists && !r.not && (!ok || v != r.value):
			return false
		}
	}
	return true
}

// String returns the text form ParseSelector reads.
func (s Selector) String() string {
	parts := make([]string, len(s.reqs))
	for i, r := range s.reqs {
		switch {
		case r.exists:
			parts[i] = r.key
		case r.not:
			parts[i] = r.key + "!=" + r.value
		default:
			parts[i] = r.key + "=" + r.value
		}
	}
	return strings.Join(parts, ",")
}
