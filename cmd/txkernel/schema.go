package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/txkernel/txkernel/internal/wireschema"
)

// schemaCmd writes the protocol's JSON Schema files (internal/wireschema)
// under --out: the command a host's developer runs to get machine-readable
// schemas of the binary they have.
func schemaCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("schema", flag.ContinueOnError)
	out := fs.String("out", "", "directory to write the schema files to (required)")
	if status, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return status
	}
	if *out == "" {
		fmt.Fprintln(stderr, "txkernel: schema: --out is required")
		return 2
	}
	files, err := wireschema.Generate()
	if err != nil {
		fmt.Fprintf(stderr, "txkernel: schema: %v\n", err)
		return 1
	}
	for name, data := range files {
		path := filepath.Join(*out, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			fmt.Fprintf(stderr, "txkernel: schema: %v\n", err)
			return 1
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			fmt.Fprintf(stderr, "txkernel: schema: %v\n", err)
			return 1
		}
	}
	fmt.Fprintf(stdout, "wrote %d schema files under %s\n", len(files), *out)
	return 0
}
