package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Stream is one run's output: the table for people and, when asked for,
// the JSON records, each written as soon as it is known.
type Stream struct {
	// Table goes to standard output, or to standard error when the JSON
	// records take standard output. The tool adds its columns with
	// SetColumns and writes its rows on it.
	Table *Table
	out   io.Writer // where the table goes
	json  io.Writer // nil: no JSON
	file  *os.File  // the JSON file to close, if any
	start time.Time
	end   End
	began bool // Begin was called: End has something to sum up
	err   error
}

// Open starts a stream. jsonPath "" writes no JSON, "-" writes it to
// stdout (the table then goes to stderr, so stdout is JSON lines only),
// anything else is a file created now.
func Open(jsonPath string, stdout, stderr io.Writer) (*Stream, error) {
	s := &Stream{out: stdout, start: time.Now()}
	switch jsonPath {
	case "":
	case "-":
		s.out, s.json = stderr, stdout
	default:
		f, err := os.Create(jsonPath)
		if err != nil {
			return nil, fmt.Errorf("json output: %w", err)
		}
		s.json, s.file = f, f
	}
	s.Table = NewTable(s.out)
	return s, nil
}

// SetColumns sets the table's columns (before the first row).
func (s *Stream) SetColumns(cols ...Column) {
	t := NewTable(s.out, cols...)
	t.err = s.Table.err
	s.Table = t
}

// record writes one JSON line: v's fields after "type".
func (s *Stream) record(kind string, v any) {
	if s.json == nil || s.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil || len(b) < 2 || b[0] != '{' {
		s.err = fmt.Errorf("encode %s record: %v", kind, err)
		return
	}
	var line bytes.Buffer
	line.WriteString(`{"type":"` + kind + `"`)
	if len(b) > 2 {
		line.WriteByte(',')
	}
	line.Write(b[1:])
	line.WriteByte('\n')
	if _, err := s.json.Write(line.Bytes()); err != nil {
		s.err = fmt.Errorf("write json record: %w", err)
	}
}

// Begin writes the begin record; the tool prints its own table header.
func (s *Stream) Begin(b Begin) {
	s.began = true
	if b.Time.IsZero() {
		b.Time = s.start
	}
	if b.Host == "" {
		b.Host, _ = os.Hostname()
	}
	s.record("begin", b)
}

// Case counts c and writes its record; the tool prints its row.
func (s *Stream) Case(c Case) {
	m := c.Measurement()
	s.end.Cases++
	if m.Failed() {
		s.end.Failed++
	} else if m.Verified {
		s.end.Verified++
	}
	s.record("case", c)
}

// End prints the summary line, writes the end record and returns it.
// runErr is the run's error, if any. A run that failed before Begin
// prints and records nothing: its error says it all.
func (s *Stream) End(runErr error) End {
	e := s.end
	e.Seconds = time.Since(s.start).Seconds()
	if runErr != nil {
		e.Error = runErr.Error()
	}
	if !s.began {
		return e
	}
	verdict := "done"
	if !e.OK() {
		verdict = "FAILED"
	}
	s.Table.line(fmt.Sprintf("# %s: %d cases, %d verified, %d failed, %.1f s", verdict, e.Cases, e.Verified, e.Failed, e.Seconds))
	s.record("end", e)
	return e
}

// Close closes the JSON file and returns the first error writing the
// table or the records.
func (s *Stream) Close() error {
	err := errors.Join(s.err, s.Table.Err())
	if s.file != nil {
		if cerr := s.file.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}
	return err
}
