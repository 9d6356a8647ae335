//go:build !tinygo

// A native harness (standard Go) for checking the scorer's logic without TinyGo: reads one
// envelope on stdin, prints the output document, or "rejected" and exit status 3.
package main

import (
	"fmt"
	"io"
	"os"

	"sluice.example/kits/go/sluice"
)

func main() {
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	output, ok := sluice.Run(input, scoreOrder)
	if !ok {
		fmt.Println("rejected")
		os.Exit(3)
	}
	os.Stdout.Write(append(output, '\n'))
}
