package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/txkernel/txkernel/wireschema"
)

// schemaCmd writes the protocol's JSON Schema files (wireschema)
// under --out: the command a host's developer runs to get machine-readable
// schemas of the binary they have. It replaces only files it wrote itself
// (a txkernel schema, by its $id): any other file in the way stops it
// before anything is written (exit 1), unless --force.
func schemaCmd(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("schema", flag.ContinueOnError)
	out := flags.String("out", "", "directory to write the schema files to (required)")
	force := flags.Bool("force", false, "replace files under --out that txkernel schema did not write")
	if status, ok := parseFlags(flags, args, stdout, stderr); !ok {
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
	if !*force {
		// Every file is checked before the first is written, so a refusal
		// leaves the directory as it was.
		for name := range files {
			path := filepath.Join(*out, filepath.FromSlash(name))
			if mine, err := writtenBySchema(path); err != nil || !mine {
				if err == nil {
					err = errors.New("it is not a schema txkernel wrote")
				}
				fmt.Fprintf(stderr, "txkernel: schema: refusing to replace %s: %v; move it away or pass --force\n", path, err)
				return 1
			}
		}
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

// schemaIDPrefix starts the $id of every file wireschema generates.
const schemaIDPrefix = "https://txkernel.dev/schema/"

// writtenBySchema reports whether path may be (re)written by schemaCmd: it
// does not exist, or it is a regular file holding a JSON object whose $id
// is one of txkernel's schemas. Errors: a file it cannot read.
func writtenBySchema(path string) (bool, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if !fi.Mode().IsRegular() {
		return false, errors.New("it is not a regular file")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	var head struct {
		ID string `json:"$id"`
	}
	if json.Unmarshal(data, &head) != nil {
		return false, nil
	}
	return strings.HasPrefix(head.ID, schemaIDPrefix), nil
}
