package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type testCase struct {
	Name string `json:"name"`
	Measure
}

func decodeLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		out = append(out, m)
	}
	return out
}

// With --json -, stdout holds only JSON lines and the table goes to stderr.
func TestStreamJSONOnStdout(t *testing.T) {
	var stdout, stderr bytes.Buffer
	s, err := Open("-", &stdout, &stderr)
	require.NoError(t, err)
	s.SetColumns(Column{Head: "name", Left: true})
	s.Begin(Begin{Tool: "t", Verified: "yes = right", Setup: map[string]int{"nics": 2}})
	s.Table.Heading()
	s.Case(testCase{Name: "a", Measure: Measure{Iters: 3, Checked: true, Verified: true, Lat: Summarize([]float64{1, 2, 3})}})
	s.Case(testCase{Name: "b", Measure: Measure{Iters: 3, Checked: true, Error: "bytes differ"}})
	s.Case(testCase{Name: "c", Measure: Measure{Iters: 3}})
	end := s.End(errors.New("1 case failed"))
	require.NoError(t, s.Close())

	require.Equal(t, End{Cases: 3, Verified: 1, Failed: 1, Seconds: end.Seconds, Error: "1 case failed"}, end)
	require.False(t, end.OK())
	recs := decodeLines(t, stdout.Bytes())
	require.Len(t, recs, 5)
	require.Equal(t, "begin", recs[0]["type"])
	require.Equal(t, "t", recs[0]["tool"])
	require.Equal(t, "yes = right", recs[0]["verified_means"])
	require.NotEmpty(t, recs[0]["time"])
	require.Equal(t, map[string]any{"nics": 2.0}, recs[0]["setup"])
	for i, name := range []string{"a", "b", "c"} {
		require.Equal(t, "case", recs[1+i]["type"])
		require.Equal(t, name, recs[1+i]["name"])
		require.Contains(t, recs[1+i], "lat_us")
	}
	require.Equal(t, 2.0, recs[1]["lat_us"].(map[string]any)["p50"])
	require.Equal(t, "bytes differ", recs[2]["error"])
	require.Equal(t, "end", recs[4]["type"])
	require.Equal(t, 1.0, recs[4]["failed"])
	require.Contains(t, stderr.String(), "# name")
	require.Contains(t, stderr.String(), "# FAILED: 3 cases, 1 verified, 1 failed")
}

// A JSON file holds every record written so far before the run ends, so
// a run killed midway keeps its rows.
func TestStreamFileIsIncremental(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.jsonl")
	var stdout bytes.Buffer
	s, err := Open(path, &stdout, &stdout)
	require.NoError(t, err)
	s.Begin(Begin{Tool: "t"})
	s.Case(testCase{Name: "a", Measure: Measure{Iters: 1}})
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Len(t, decodeLines(t, b), 2, "begin and the first case are on disk before End")
	end := s.End(nil)
	require.True(t, end.OK())
	require.NoError(t, s.Close())
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	require.Len(t, decodeLines(t, b), 3)
	require.Contains(t, stdout.String(), "# done: 1 cases, 0 verified, 0 failed")

	_, err = Open(filepath.Join(t.TempDir(), "no", "such", "dir.jsonl"), &stdout, &stdout)
	require.Error(t, err)
}

// A run that fails before it begins leaves the output empty.
func TestStreamNotBegun(t *testing.T) {
	var stdout bytes.Buffer
	s, err := Open("-", &stdout, &stdout)
	require.NoError(t, err)
	end := s.End(errors.New("no RDMA device"))
	require.NoError(t, s.Close())
	require.False(t, end.OK())
	require.Empty(t, stdout.String())
}

func TestVerdict(t *testing.T) {
	require.Equal(t, VerdictYes, Measure{Checked: true, Verified: true}.Verdict())
	require.Equal(t, VerdictFail, Measure{Checked: true}.Verdict())
	require.Equal(t, VerdictFail, Measure{Checked: true, Verified: true, Error: "x"}.Verdict())
	require.Equal(t, VerdictFail, Measure{Error: "timed out"}.Verdict())
	require.Equal(t, VerdictNo, Measure{}.Verdict())
}
