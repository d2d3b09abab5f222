package jsondoc

// Operation is one RFC 6902 operation (RFC 6902 §4). Op is add, remove,
// replace, move, copy or test; Path and From are RFC 6901 pointers; Value
// is a decoded JSON value (see the package doc) and HasValue tells an
// explicit null from an absent member.
type Operation struct {
	Op       string
	Path     string
	From     string
	Value    any
	HasValue bool
}
