package dl_test

import (
	"errors"
	"fmt"

	"github.com/ferryrdma/ferry/internal/dl"
)

// A library that is not installed is reported as not supported, with the
// loader's reason kept in the message.
func ExampleLibrary_Open() {
	lib := dl.New(dl.Now, "libferry-example-missing.so.1")
	err := lib.Open()
	fmt.Println(errors.Is(err, dl.ErrNotSupported))
	// Output: true
}
