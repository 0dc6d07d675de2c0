package job

import (
	"encoding/json"
	"io"
	"os"

	"github.com/ferryrdma/ferry/fabric"
)

// Report is what rank 0 writes with -json: the program, its configuration,
// the engine it ran on and its results.
type Report struct {
	Program  string      `json:"program"`
	Provider string      `json:"provider"`
	Ranks    int         `json:"ranks"`
	Engine   fabric.Info `json:"engine"`
	Config   any         `json:"config"`
	Verified bool        `json:"verified"`
	Results  any         `json:"results"`
}

// Emit writes rank 0's JSON report when -json was given. Other ranks do
// nothing.
func (r *Rank) Emit(program string, config, results any) error {
	if r.ID != 0 || r.opts.JSON == "" {
		return nil
	}
	rep := Report{Program: program, Provider: r.opts.Provider, Ranks: r.World, Engine: r.Info, Config: config,
		Verified: true, Results: results}
	return writeJSON(r.opts.JSON, rep)
}

// writeJSON writes v, indented, to the file name, or to stdout for "-".
func writeJSON(name string, v any) error {
	var w io.Writer = os.Stdout
	if name != "-" {
		f, err := os.Create(name)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
