package jsondoc

// ResolvedTarget is one operation's path resolved against the document as
// the operations before it left it (seed 000's "resolved target plan"):
// Kind is member, element, append or root, and an append ("-") is
// resolved to the index it lands at, in Path.
type ResolvedTarget struct {
	OpIndex int
	Op      string
	Path    string
	Kind    string
	Exists  bool // the path held a value before this operation
}

// PathPreview is the before/after of one operation's resolved path:
// Before is its value before the whole patch, After its value after the
// whole patch; Existed and Exists say whether there was one.
type PathPreview struct {
	OpIndex int
	Op      string
	Path    string
	From    string
	Before  any
	After   any
	Existed bool
	Exists  bool
}

// Preview gives, for each resolved target, the value at its path in before
// and in after (patch/validate's preview).
func Preview(before, after any, targets []ResolvedTarget, ops []Operation) []PathPreview {
	out := make([]PathPreview, len(targets))
	for i, t := range targets {
		pp := PathPreview{OpIndex: t.OpIndex, Op: t.Op, Path: t.Path, From: ops[t.OpIndex].From}
		if p, err := ParsePointer(t.Path); err == nil {
			pp.Before, pp.Existed = lookup(before, p)
			pp.After, pp.Exists = lookup(after, p)
		}
		out[i] = pp
	}
	return out
}

func lookup(v any, p Pointer) (any, bool) {
	got, err := Get(v, p)
	return got, err == nil
}
