// The input envelope {"payload","secrets","permissions","action"} and Run, the pure core of
// the guest ABI's execute (the wasm glue is in abi_tinygo.go).
package sluice

// Envelope members the host left out read as JSON null.
type Envelope struct {
	Payload, Secrets, Permissions, Action Value
}

// Handler writes the output document into out and returns true, or returns false to reject.
type Handler func(env *Envelope, out *Writer) bool

// Secret returns the secret key, or false when the host did not inject it.
func (e *Envelope) Secret(key string) (Str, bool) {
	value, ok := e.Secrets.Get(key)
	if !ok {
		return Str{}, false
	}
	return value.Str()
}

// HasPermission reports whether the approved permissions include permission exactly.
func (e *Envelope) HasPermission(permission string) bool {
	found := false
	e.Permissions.Each(func(granted Value) bool {
		if text, ok := granted.Str(); ok && text.Equal(permission) {
			found = true
		}
		return !found
	})
	return found
}

// Run parses input, calls handler and returns the output document (without the NUL), or
// false when the input is not a JSON object or the handler rejected it.
func Run(input []byte, handler Handler) ([]byte, bool) {
	root, ok := Parse(input)
	if !ok || root.Kind() != Object {
		return nil, false
	}
	member := func(key string) Value {
		if value, ok := root.Get(key); ok {
			return value
		}
		return nullValue()
	}
	env := Envelope{Payload: member("payload"), Secrets: member("secrets"), Permissions: member("permissions"), Action: member("action")}
	out := Writer{buf: make([]byte, 0, 1024)}
	if !handler(&env, &out) {
		return nil, false
	}
	return out.buf, true
}
