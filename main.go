// Command gpumarket is a terminal UI for the GPU capacity market.
package main

import (
	"os"

	"github.com/gpumarket/gpumarket/cmd"
)

func main() {
	os.Exit(cmd.Execute())
}
