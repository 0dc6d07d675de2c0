package report

import "time"

// Schema is the version of the record family; it changes when a field
// changes meaning or goes away (adding one does not change it).
const Schema = 1

// Verdicts, the "verified" column of a table.
const (
	VerdictYes  = "yes"  // checked, and right
	VerdictNo   = "no"   // not checked
	VerdictFail = "FAIL" // checked, and wrong (or the case failed before its check)
)

// Measure is what every case record carries, whatever the tool.
type Measure struct {
	Iters  int `json:"iters"`
	Warmup int `json:"warmup"`
	// Lat is the distribution of one timed iteration, in microseconds.
	Lat Stats `json:"lat_us"`
	// Checked says the case's results were checked; Verified that they
	// were right. A case that failed before its check has Checked set
	// when it was to be checked, and an Error.
	Checked  bool   `json:"checked"`
	Verified bool   `json:"verified"`
	Error    string `json:"error,omitempty"`
}

// Measurement returns m; a record embedding Measure implements [Case].
func (m Measure) Measurement() Measure { return m }

// Failed reports whether the case failed or did not verify.
func (m Measure) Failed() bool { return m.Error != "" || (m.Checked && !m.Verified) }

// Verdict is the "verified" cell of the case.
func (m Measure) Verdict() string {
	switch {
	case m.Failed():
		return VerdictFail
	case m.Checked && m.Verified:
		return VerdictYes
	}
	return VerdictNo
}

// Case is a case record: any struct embedding [Measure].
type Case interface{ Measurement() Measure }

// Begin is the first record of a run.
type Begin struct {
	Tool string    `json:"tool"`
	Time time.Time `json:"time"`
	Host string    `json:"host,omitempty"`
	Args []string  `json:"args,omitempty"`
	// Verified says what a "verified" case means for this tool.
	Verified string `json:"verified_means"`
	// Setup is the tool's own description of the run (its header).
	Setup any `json:"setup,omitempty"`
}

// End is the last record of a run.
type End struct {
	Cases    int     `json:"cases"`
	Verified int     `json:"verified"`
	Failed   int     `json:"failed"`
	Seconds  float64 `json:"seconds"`
	// Error is why the run ended with an error (a failed case, an
	// interrupted run); empty when it succeeded.
	Error string `json:"error,omitempty"`
}

// OK reports whether every case ran and none failed.
func (e End) OK() bool { return e.Failed == 0 && e.Error == "" }
