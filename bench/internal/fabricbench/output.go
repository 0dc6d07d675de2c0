package fabricbench

import (
	"fmt"
	"io"
	"os"
)

// Output says where a report goes besides the table.
type Output struct {
	// JSON is a file for the JSON report; "-" means stdout, and the table
	// then goes to stderr so stdout stays one JSON document.
	JSON string
	// Plot is a PNG file for the bandwidth chart.
	Plot string
}

// Emit prints the table and writes the JSON and plot files out asks for.
func (r *Report) Emit(out Output, stdout, stderr io.Writer) error {
	table := stdout
	if out.JSON == "-" {
		table = stderr
	}
	if err := r.WriteTable(table); err != nil {
		return err
	}
	switch out.JSON {
	case "":
	case "-":
		if err := r.WriteJSON(stdout); err != nil {
			return err
		}
	default:
		if err := writeFile(out.JSON, r.WriteJSON); err != nil {
			return err
		}
	}
	if out.Plot != "" {
		if err := writeFile(out.Plot, r.WritePlot); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(name string, write func(io.Writer) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	return f.Close()
}
