//go:build tinygo

// The guest ABI glue for TinyGo's wasm-unknown target (UNVERIFIED: TinyGo is not installed
// where this kit was written). The action's main package exports these as alloc and execute.
package sluice

import "unsafe"

// TinyGo's wasm-unknown runtime sets up its heap and runs package initializers in the exported
// `_start`, which the Sluice host never calls (it calls only alloc and execute), so the first
// call into the kit runs it.
//
//go:linkname runtimeStart _start
func runtimeStart()

var started bool

// pinned keeps the input and output buffers reachable for the whole call.
var pinned [][]byte

func ensureStarted() {
	if !started {
		started = true
		runtimeStart()
	}
}

// Alloc backs the `alloc(len) -> ptr` export: a buffer for the host's input.
func Alloc(length int32) int32 {
	ensureStarted()
	if length < 0 {
		panic("sluice: negative alloc")
	}
	buf := make([]byte, length+1)
	pinned = append(pinned, buf)
	return int32(uintptr(unsafe.Pointer(&buf[0])))
}

// Execute backs the `execute(ptr, len) -> ptr` export: 0 when rejected, otherwise the address
// of the NUL-terminated output document. Output past MaxOutputBytes panics (a trap).
func Execute(ptr, length int32, handler Handler) int32 {
	ensureStarted()
	if length < 0 {
		return 0
	}
	input := unsafe.Slice((*byte)(unsafe.Pointer(uintptr(ptr))), int(length))
	output, ok := Run(input, handler)
	if !ok {
		return 0
	}
	if len(output) > MaxOutputBytes {
		panic("sluice: output document larger than 256 KB")
	}
	output = append(output, 0)
	pinned = append(pinned, output)
	return int32(uintptr(unsafe.Pointer(&output[0])))
}
