package tests

import (
	_ "github.com/ferryrdma/ferry/efa"
	_ "github.com/ferryrdma/ferry/ipc"
	_ "github.com/ferryrdma/ferry/memfabric"
	_ "github.com/ferryrdma/ferry/verbs"
)
