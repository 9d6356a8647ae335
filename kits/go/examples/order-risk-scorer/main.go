//go:build tinygo

// The wasm entry of the Go order-risk-scorer: the two guest ABI exports (memory is exported by
// the linker). Build: see kits/go/README.md. UNVERIFIED.
package main

import "sluice.example/kits/go/sluice"

//export alloc
func alloc(length int32) int32 { return sluice.Alloc(length) }

//export execute
func execute(ptr, length int32) int32 { return sluice.Execute(ptr, length, scoreOrder) }

func main() {}
