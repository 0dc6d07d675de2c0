package tests

import (
	_ "github.com/ferryrdma/ferry/efa"
	_ "github.com/ferryrdma/ferry/internal/memfabric"
	_ "github.com/ferryrdma/ferry/ipc"
)
